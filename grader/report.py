"""Writing a graded Result: result.json, report.html (jinja2) and Gradescope's results.json.

Every file is written atomically (a temporary file in the same folder, then rename), so a grader
killed at any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from grader.records import Result

TEMPLATES = Path(__file__).resolve().parent / "templates"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _jinja() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters["pts"] = lambda x: "–" if x is None else f"{round(x, 2):g}"
    return env


def render_html(result: Result) -> str:
    return _jinja().get_template("report.html.j2").render(r=result)


def gradescope(result: Result) -> dict[str, Any]:
    """Gradescope's results.json as a dictionary (grader.gradescope builds and checks it)."""
    from grader.gradescope import as_dict

    return as_dict(result)


def gradescope_json(result: Result) -> str:
    from grader.gradescope import results_json

    return results_json(result)


def write_result(result: Result, out: Path) -> None:
    """result.json, report.html and gradescope/results.json under `out`."""
    write_atomic(out / "result.json", result.model_dump_json(indent=2))
    write_atomic(out / "report.html", render_html(result))
    write_atomic(out / "gradescope" / "results.json", gradescope_json(result))
