"""The tree's rules, held statically: rooms, sizes, no import circles, and what a worker may load.

grader/engine/harness/__init__.py states the rules of the room that runs beside the submission; these
tests read every grader module's imports (function-level ones included: a circle held open by a
late import is still a circle) without importing anything. Those under `if TYPE_CHECKING:` never
run, so what a process loads leaves them out (GRAPH); the design's circles and the folders that
import each other count them too (DESIGN): a type named across a circle is a circle all the same.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GRADER = ROOT / "grader"

#: what a worker may load besides grader.engine.harness.* and grader.engine.problems.*: the kernel it shares
SHARED_KERNEL = {
    "grader",
    "grader.engine",
    "grader.engine.timing",
    "grader.engine.kernel_cache",
    "grader.engine.loading",
}
SHARED_PACKAGES = ("grader.engine.spec", "grader.engine.protocol")
#: the only trusted modules that may import the harness: pytest handout runs the same calls, in
#: its own process (support: timing on a GPU) and in each problem's child process (child)
HARNESS_USERS = {"grader.engine.handout.support", "grader.engine.handout.child"}
#: where argparse may be imported: the verbs, the CLI that lists them, the worker's own argv
ARGPARSE_HOMES = ("grader.commands", "grader.cli", "grader.engine.orchestrator.launch", "grader.engine.harness.serve")
#: Folders that import each other and circles through TYPE_CHECKING imports still allowed: none
#: since issue 51 (an entry that no longer occurs must leave, the tests say so: the rule only tightens)
ALLOWED_MUTUAL_FOLDERS: set[tuple[str, str]] = set()
ALLOWED_CIRCLES: list[list[str]] = []
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
#: __init__.py, cli.py, commands/ (the verbs), engine/ (one folder graded), course/ (a class)
MAX_TOP_LEVEL = 6


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


def imports_of(name: str, type_checking: bool = False) -> set[str]:
    """Every grader module `name` imports, at any depth of its code, and the packages above them;
    with `type_checking`, those only a type checker reads (`if TYPE_CHECKING:`) too."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    skip = set() if type_checking else _type_checking_only(tree)
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
DESIGN = {name: imports_of(name, type_checking=True) for name in MODULES}


def closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += GRAPH[name]
    return seen


def cycles(graph: dict[str, set[str]] = GRAPH) -> list[list[str]]:
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
        for w in graph[v]:
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def room(name: str) -> str:
    """The folder a module is in, as "engine.judge" or "course.batch" inside grader/engine and
    grader/course, "commands", or "engine" and "course" for the modules beside their folders (each
    side's shared kernel); "cli" for cli.py, the command line's entry: nothing imports it, so it
    stands above every room and no circle can pass through it (test_nothing_imports_the_command_line)."""
    parts = name.split(".")
    if name == "grader.cli":
        return "cli"
    if len(parts) > 2 and (GRADER / parts[1] / parts[2] / "__init__.py").is_file():
        return f"{parts[1]}.{parts[2]}"
    return parts[1] if len(parts) > 1 else "(top)"


def mutual_folders(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """The pairs of rooms that import each other (each pair in name order)."""
    edges = {(room(a), room(b)) for a, targets in graph.items() for b in targets if room(a) != room(b)}
    return {(a, b) for a, b in edges if a < b and (b, a) in edges}


def test_no_import_circle() -> None:
    assert cycles() == []


def test_no_import_circle_even_through_type_checking_imports() -> None:
    found = cycles(DESIGN)
    assert [c for c in found if c not in ALLOWED_CIRCLES] == []
    gone = [c for c in ALLOWED_CIRCLES if c not in found]
    assert not gone, f"no longer a circle: take {gone} out of ALLOWED_CIRCLES"


def test_no_two_folders_import_each_other() -> None:
    """Each room builds on the ones below it: a pair that imports each other has no below."""
    allowed = ALLOWED_MUTUAL_FOLDERS
    found = mutual_folders(DESIGN)
    assert sorted(found - allowed) == []
    gone = sorted(allowed - found)
    assert not gone, f"these folders no longer import each other: take {gone} out of the allowed pairs"


def test_nothing_imports_the_command_line() -> None:
    assert [name for name, targets in DESIGN.items() if "grader.cli" in targets] == []


def test_the_checks_see_a_type_checking_circle_and_a_pair_of_folders(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    source = tmp_path / "typed.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from grader.engine.orchestrator.trace import span\n"
    )
    monkeypatch.setitem(MODULES, "grader.engine.judge.typed", source)
    typed = imports_of("grader.engine.judge.typed", type_checking=True)
    assert imports_of("grader.engine.judge.typed") == set() and "grader.engine.orchestrator.trace" in typed
    monkeypatch.setitem(DESIGN, "grader.engine.judge.typed", typed)
    monkeypatch.setitem(
        DESIGN,
        "grader.engine.orchestrator.trace",
        DESIGN["grader.engine.orchestrator.trace"] | {"grader.engine.judge.typed"},
    )
    assert ["grader.engine.judge.typed", "grader.engine.orchestrator.trace"] in cycles(DESIGN)
    assert ("engine.judge", "engine.orchestrator") in mutual_folders(DESIGN)


def test_the_check_finds_a_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "grader.engine.protocol", GRAPH["grader.engine.protocol"] | {"grader.engine.timing"})
    monkeypatch.setitem(GRAPH, "grader.engine.timing", GRAPH["grader.engine.timing"] | {"grader.engine.protocol"})
    assert ["grader.engine.protocol", "grader.engine.timing"] in cycles()


def test_a_worker_loads_only_the_harness_the_problems_and_the_shared_kernel() -> None:
    # grader.engine.problems imports every problem folder it finds (by name, so no import statement shows it)
    problems = [m for m in MODULES if m.startswith("grader.engine.problems.")]
    loaded = set().union(*(closure(m) for m in ["grader.engine.harness.serve", *problems]))
    allowed = {
        m
        for m in loaded
        if m in SHARED_KERNEL
        or m.startswith(("grader.engine.harness.", "grader.engine.problems"))
        or m == "grader.engine.harness"
        or any(m == p or m.startswith(p + ".") for p in SHARED_PACKAGES)
    }
    assert "grader.engine.harness.calls" in loaded and "grader.engine.problems.gelu.kind" in loaded
    assert sorted(loaded - allowed) == []


def test_nothing_trusted_but_the_handouts_support_imports_the_harness() -> None:
    users = {
        name
        for name, targets in GRAPH.items()
        if not name.startswith("grader.engine.harness") and any(t.startswith("grader.engine.harness") for t in targets)
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
    monkeypatch.setitem(
        GRAPH, "grader.engine.harness.calls", GRAPH["grader.engine.harness.calls"] | {"grader.engine.judge.checks"}
    )
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
COURSE = ("grader.course",)
#: what the course layer may use of the engine: the spec (its models and their reading), the
#: records (the model and what reads and writes it), the command line a grading is launched by,
#: and re-scoring: a stored record
#: under a changed spec (`grader batch` resuming, Gradescope's run adding a GPU batch's times),
#: the engine's rules applied to the record's numbers with no kernel run
ENGINE_API = (
    "grader.engine.spec",
    "grader.engine.assignment",
    "grader.engine.records",
    "grader.engine.orchestrator.launch",
    "grader.engine.judge.rescore",
)


def _in(name: str, rooms: tuple[str, ...]) -> bool:
    return any(name == room or name.startswith(room + ".") for room in rooms)


def seam_crossings() -> list[str]:
    """Every import from the course layer into the engine beyond ENGINE_API (and the packages
    above what it names, whose __init__ an import of it runs)."""
    above = {api.rsplit(".", i)[0] for api in ENGINE_API for i in range(api.count(".") + 1)}
    return sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if _in(name, COURSE)
        for target in targets
        if target not in above and not _in(target, COURSE) and not _in(target, ENGINE_API)
    )


def test_the_course_layer_uses_the_engine_only_through_its_seam() -> None:
    assert seam_crossings() == []


def test_the_seam_check_sees_a_course_module_calling_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        GRAPH,
        "grader.course.batch.runners",
        GRAPH["grader.course.batch.runners"] | {"grader.engine.orchestrator.grade"},
    )
    assert seam_crossings() == ["grader.course.batch.runners -> grader.engine.orchestrator.grade"]


def test_the_engine_knows_nothing_of_a_class() -> None:
    reaching = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if not _in(name, COURSE) and not name.startswith(("grader.commands", "grader.cli"))
        for target in targets
        if _in(target, COURSE)
    )
    assert reaching == []
