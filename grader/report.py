"""Writing a graded Result: result.json, report.html (jinja2) and Gradescope's results.json.

Every file is written atomically (a temporary file in the same folder, then rename), so a grader
killed at any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import json
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
    """Gradescope's autograder results format: tests with visibility, and leaderboard entries."""
    tests = []
    for problem in result.problems:
        for test in problem.tests:
            tests.append(
                {
                    "name": test.name,
                    "score": test.score,
                    "max_score": test.max_score,
                    "status": "passed" if test.status == "passed" else "failed",
                    "output": (test.case + "\n" + test.message).strip(),
                    "visibility": "visible" if test.visibility == "public" else "after_published",
                }
            )
        perf = problem.performance
        if perf is not None:
            tests.append(
                {
                    "name": f"{problem.name}: performance",
                    "score": perf.score or 0.0,
                    "max_score": perf.max_score,
                    "status": "passed" if perf.status == "measured" and (perf.score or 0) > 0 else "failed",
                    "output": perf.reason or (f"speedup vs reference (geometric mean): {perf.ratio_geomean:.3f}" if perf.ratio_geomean else ""),
                    "visibility": "visible",
                }
            )
    leaderboard = [
        {"name": p.name, "value": round(p.performance.ratio_geomean, 4), "order": "desc"}
        for p in result.problems
        if p.performance and p.performance.ratio_geomean
    ]
    out: dict[str, Any] = {
        "score": result.score,
        "execution_time": int(result.duration_s),
        "output": " ".join(result.warnings) or f"{result.score:g} / {result.max_score:g}",
        "tests": tests,
    }
    if leaderboard:
        ratios = [e["value"] for e in leaderboard]
        from grader.scoring import geomean

        leaderboard.append({"name": "overall speedup", "value": round(geomean(ratios), 4), "order": "desc"})
        out["leaderboard"] = leaderboard
    return out


def write_result(result: Result, out: Path) -> None:
    """result.json, report.html and gradescope/results.json under `out`."""
    write_atomic(out / "result.json", result.model_dump_json(indent=2))
    write_atomic(out / "report.html", render_html(result))
    write_atomic(out / "gradescope" / "results.json", json.dumps(gradescope(result), indent=2))
