"""What `grader submit` checks before any test or upload: the folder is there and every file parses.

A SyntaxError was once uploaded and graded (a quota spent on code that cannot import), and a
mistyped folder ran 20 s of tests before it was said not to exist; both are known in milliseconds.
"""

from __future__ import annotations

import ast
from pathlib import Path

from grader.course.pack import PackError, files_to_pack
from grader.engine.spec import toml
from grader.engine.spec.model import SpecError


def spec_modules(spec: Path) -> list[tuple[str, str]]:
    """(problem, module) of each problem the spec names, read without validating it: validating
    loads every problem's kind, which imports PyTorch (seconds) before a typo could be said."""
    try:
        problems = toml.read(spec).get("problems")
        return [(str(p["name"]), str(p["module"])) for p in problems]  # type: ignore[union-attr]
    except (KeyError, TypeError, AttributeError):
        raise SpecError(f"{spec}: every [[problems]] table needs a name and a module") from None


def syntax_error(path: Path, folder: Path) -> str | None:
    """Where `path` fails to parse, as "name.py, line N: message", or None when it parses."""
    try:
        ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:  # IndentationError and TabError included
        where = f", line {exc.lineno}" if exc.lineno else ""
        return f"{path.relative_to(folder)}{where}: {exc.msg}"
    except ValueError as exc:  # a null byte in the source
        return f"{path.relative_to(folder)}: {exc}"
    return None


def check_submission(folder: Path, modules: list[str]) -> None:
    """Raise PackError naming what to fix: a missing folder, a missing module, a file that does not parse."""
    if not folder.exists():
        raise PackError(f"no such folder: {folder}")
    if not folder.is_dir():
        raise PackError(f"{folder} is not a folder (expected the folder with {', '.join(m + '.py' for m in modules)})")
    files = files_to_pack(folder)
    names = {str(p.relative_to(folder)) for p in files}
    missing = [f"{m}.py" for m in modules if f"{m}.py" not in names]
    if missing:
        raise PackError(f"{folder} lacks {', '.join(missing)}: keep the stub files even for problems you skip")
    errors = [e for e in (syntax_error(p, folder) for p in files) if e]
    if errors:
        raise PackError(
            "not submitted, these files do not parse (Python would not import them, so every test would fail):\n  "
            + "\n  ".join(errors)
        )
