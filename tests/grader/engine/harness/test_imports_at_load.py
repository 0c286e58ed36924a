"""Grader code that runs inside the worker imports everything up front.

The worker drops the grader's modules from `sys.modules` and its `sys.path` has no way back to
them before the submission is imported (grader/engine/harness/serve.py `_forget_grader`: a submission cannot
import the running harness). A function of the grader that imports a grader module when it is
first called therefore fails inside the worker, and only there: seen on the H200, a refill that
imported its kernel lazily made every timed round fail while every in-process test passed.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

#: function-level imports in worker-side modules that never run in the worker, with the reason
NOT_IN_THE_WORKER: dict[tuple[str, str], str] = {}


def worker_modules() -> dict[str, str]:
    """The grader modules a fresh worker process has loaded, by name, with their files."""
    code = (
        "import json, sys, grader.engine.harness.serve; "
        "print(json.dumps({n: m.__file__ for n, m in sys.modules.items() if "
        "n == 'grader' or n.startswith('grader.')}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def late_imports(path: str) -> list[tuple[str, int, str]]:
    """(function, line, module) of every grader import inside a function of the file."""
    found = []
    for fn in ast.walk(ast.parse(Path(path).read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [(fn.name, node.lineno, name) for name in names if name == "grader" or name.startswith("grader.")]
    return found


def test_worker_side_code_imports_no_grader_module_late() -> None:
    modules = worker_modules()
    assert "grader.engine.harness.serve" in modules and "grader.engine.problems.base" in modules
    late = [
        f"{name}:{line} in {fn}() imports {module}"
        for name, path in sorted(modules.items())
        for fn, line, module in late_imports(path)
        if (name, fn) not in NOT_IN_THE_WORKER
    ]
    assert not late, "imports that fail inside the worker (move them to the top of the module):\n" + "\n".join(late)


def test_the_check_sees_a_late_import(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def refill():\n    from grader.engine.problems import fill\n    return fill\n")
    assert late_imports(str(source)) == [("refill", 2, "grader.engine.problems")]
