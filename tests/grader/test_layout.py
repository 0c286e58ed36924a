"""The tree's rules, held statically: rooms, sizes, no import circles, and what a worker may load.

grader/harness/__init__.py states the rules of the room that runs beside the submission; these
tests read every grader module's imports (function-level ones included: a circle held open by a
late import is still a circle) without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"

#: what a worker may load besides grader.harness.* and grader.problems.*: the kernel it shares
SHARED_KERNEL = {"grader", "grader.timing", "grader.kernel_cache", "grader.loading"}
SHARED_PACKAGES = ("grader.spec", "grader.protocol")
#: the only trusted modules that may import the harness: pytest handout runs the same calls, in
#: its own process (support: timing on a GPU) and in each problem's child process (child)
HARNESS_USERS = {"grader.handout.support", "grader.handout.child"}
#: where argparse may be imported: the verbs, the CLI that lists them, the worker's own argv
ARGPARSE_HOMES = ("grader.commands", "grader.cli", "grader.launch", "grader.harness.serve")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
MAX_TOP_LEVEL = 20


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(GRADER.rglob("*.py")) if "__pycache__" not in p.parts}


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under `if TYPE_CHECKING:` (never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                lines |= set(range(inner.lineno, (inner.end_lineno or inner.lineno) + 1))
    return lines


def imports_of(name: str) -> set[str]:
    """Every grader module `name` imports, at any depth of its code, and the packages above them."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    skip = _type_checking_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names
            }
    targets = set()
    for target in found:
        if target == "grader" or target.startswith("grader."):
            while target not in MODULES and "." in target:
                target = target.rsplit(".", 1)[0]
            parts = target.split(".")
            targets |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    # a package's own modules run after its __init__ has started: no edge from them up to it
    return {t for t in targets if t != name and not name.startswith(t + ".")}


GRAPH = {name: imports_of(name) for name in MODULES}


def closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += GRAPH[name]
    return seen


def cycles() -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    assert cycles() == []


def test_the_check_finds_a_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "grader.protocol", GRAPH["grader.protocol"] | {"grader.timing"})
    monkeypatch.setitem(GRAPH, "grader.timing", GRAPH["grader.timing"] | {"grader.protocol"})
    assert ["grader.protocol", "grader.timing"] in cycles()


def test_a_worker_loads_only_the_harness_the_problems_and_the_shared_kernel() -> None:
    # grader.problems imports every problem folder it finds (by name, so no import statement shows it)
    problems = [m for m in MODULES if m.startswith("grader.problems.")]
    loaded = set().union(*(closure(m) for m in ["grader.harness.serve", *problems]))
    allowed = {
        m
        for m in loaded
        if m in SHARED_KERNEL
        or m.startswith(("grader.harness.", "grader.problems"))
        or m == "grader.harness"
        or any(m == p or m.startswith(p + ".") for p in SHARED_PACKAGES)
    }
    assert "grader.harness.calls" in loaded and "grader.problems.gelu.kind" in loaded
    assert sorted(loaded - allowed) == []


def test_nothing_trusted_but_the_handouts_support_imports_the_harness() -> None:
    users = {
        name
        for name, targets in GRAPH.items()
        if not name.startswith("grader.harness") and any(t.startswith("grader.harness") for t in targets)
    }
    assert users <= HARNESS_USERS, sorted(users - HARNESS_USERS)


def test_argparse_lives_in_the_commands() -> None:
    users = [
        name
        for name, path in MODULES.items()
        if "argparse"
        in {a.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import) for a in n.names}
        and not name.startswith(ARGPARSE_HOMES)
    ]
    assert users == []


def test_the_top_level_is_a_few_rooms() -> None:
    # modules and packages: a folder of leftovers (no __init__.py, no module) is no room
    entries = [p.name for p in GRADER.iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()]
    assert len(entries) <= MAX_TOP_LEVEL, f"{len(entries)} entries in grader/: {sorted(entries)}"


def test_modules_and_functions_stay_small() -> None:
    long_modules = [
        f"{name}: {n} lines"
        for name, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    long_functions = [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (node.end_lineno or node.lineno) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long_modules == [] and long_functions == []


def test_the_check_sees_a_harness_module_reaching_the_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "grader.harness.calls", GRAPH["grader.harness.calls"] | {"grader.judge.checks"})
    with pytest.raises(AssertionError):
        test_a_worker_loads_only_the_harness_the_problems_and_the_shared_kernel()


def test_the_slowest_first_files_of_the_test_order_exist() -> None:
    """tests/conftest.py starts the two test processes on these files: a renamed one would quietly
    fall to the end of the order, where a long file runs alone."""
    from tests.conftest import SLOWEST_FIRST

    missing = [path for path in SLOWEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"tests/conftest.py SLOWEST_FIRST names files that are not there: {missing}"


# -- the seam between a class and the engine (issue 51) -------------------------------------------

#: the course layer: what grades a class, serves students and ranks them; it launches the engine
COURSE = ("grader.batch", "grader.cluster", "grader.containers", "grader.course", "grader.leaderboard")
#: what the course layer may use of the engine: the spec, the records (the model and what reads
#: and writes it) and the command line a grading is launched by
ENGINE_API = ("grader.spec", "grader.records", "grader.launch")
#: still to go through the seam (issue 51): re-scoring a stored record, and the flags and
#: geomean the leaderboard computes again instead of reading them from the record
NOT_YET = {"grader.judge", "grader.judge.rescore", "grader.judge.flags", "grader.judge.scoring"}


def _in(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == room or name.startswith(room + ".") for room in rooms)


def seam_crossings() -> list[str]:
    """Every import from the course layer into the engine beyond ENGINE_API (and NOT_YET)."""
    return sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _in(name, COURSE)
        for target in targets
        if target != "grader" and not _in(target, COURSE) and not _in(target, ENGINE_API) and target not in NOT_YET
    )


def test_the_course_layer_uses_the_engine_only_through_its_seam() -> None:
    assert seam_crossings() == []


def test_the_seam_check_sees_a_course_module_calling_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "grader.batch.runners", GRAPH["grader.batch.runners"] | {"grader.orchestrator.grade"})
    assert seam_crossings() == ["grader.batch.runners -> grader.orchestrator.grade"]


def test_the_engine_knows_nothing_of_a_class() -> None:
    reaching = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if not _in(name, COURSE) and not name.startswith(("grader.commands", "grader.cli"))
        for target in targets
        if _in(target, COURSE)
    )
    assert reaching == []
