"""A static scan of the submission for known cheat patterns.

Findings are evidence for a human reading the report, never a verdict: a student may have a
good reason to read a file. The verdicts come from running the code (fresh inputs, profiling,
the worker's tamper guard). The scan matters most for what running cannot settle: code that
reaches into the grader's harness through frames or the garbage collector, or that hides a
PyTorch op from the profiler, leaves these traces in its source.

The scan itself must survive any file: it reads only regular files (never through a symbolic
link, never a FIFO), at most MAX_FILE_BYTES of each, and walks syntax trees without recursion,
so neither a huge nor a deeply nested file can stop a grade.
"""

from __future__ import annotations

import ast
import os
import stat
import time
from pathlib import Path

from grader.engine.judge.scan_rules import (
    ATTRIBUTES,
    CALLS,
    GENERATED_CODE,
    INTERPRETER_DATA,
    MODULES,
    NAMESPACE_CALLS,
    NAMESPACE_TOOLS,
    NUMPY_FINDING,
    NUMPY_FUNCTIONS,
    NUMPY_METHODS,
    NUMPY_TORCH,
    PATCHED_ROOTS,
    PROFILER_WORDS,
    STRINGS,
)
from grader.engine.records.model import Finding

MAX_FILE_BYTES = 2 << 20
MAX_FILES = 500
MAX_FINDINGS = 200
MAX_DOTTED = 64  # parts of an attribute chain a rule reads (`torch.ops.aten.gelu.default` is 5)
#: seconds the scan of one submission may take; past it the scan stops and says so
SCAN_BUDGET_S = 30.0
SKIP_DIRS = {"__pycache__", ".git", ".ipynb_checkpoints"}
NATIVE_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
ELF_MAGIC = b"\x7fELF"


def _first_items(node: ast.Call) -> list[ast.AST]:
    """The first argument of a call, and the first item of it when it is a list (subprocess argv)."""
    if not node.args:
        return []
    first = node.args[0]
    return [first, *first.elts[:1]] if isinstance(first, (ast.List, ast.Tuple)) else [first]


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain on a name; None for any other node or a chain past MAX_DOTTED.

    Every rule looks at names a few parts long; a cap keeps the scan linear where a chain of a
    million attributes (one 2 MiB helper) made it quadratic: 110 s and 1.4 GB in the orchestrator.
    """
    parts = []
    while isinstance(node, ast.Attribute):
        if len(parts) >= MAX_DOTTED:
            return None
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


#: environment variables a kernel file reads for honest reasons (the tutorials pick block sizes by
#: TRITON_INTERPRET): a read of one of these by its literal name is not an env-probe finding
HARMLESS_ENV = frozenset({"TRITON_INTERPRET"})


def _harmless_env_read(node: ast.AST) -> ast.AST | None:
    """The `os.environ` node of `os.environ.get("K")`, `os.environ["K"]` or `"K" in os.environ` (or the
    call `os.getenv("K")`) for a harmless K; None for anything else."""
    key: ast.AST | None = None
    environ: ast.AST | None = None
    if isinstance(node, ast.Call) and node.args:
        name = _dotted(node.func)
        if name == "os.getenv":
            key, environ = node.args[0], node
        elif name == "os.environ.get" and isinstance(node.func, ast.Attribute):
            key, environ = node.args[0], node.func.value
    elif isinstance(node, ast.Subscript) and _dotted(node.value) == "os.environ":
        key, environ = node.slice, node.value
    elif isinstance(node, ast.Compare) and len(node.comparators) == 1 and _dotted(node.comparators[0]) == "os.environ":
        key, environ = node.left, node.comparators[0]
    if isinstance(key, ast.Constant) and key.value in HARMLESS_ENV:
        return environ
    return None


def _names(node: ast.AST) -> set[str]:
    """The name a node spells: an attribute's, a variable's, a string constant's."""
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Name):
        return {node.id}
    return {node.value} if isinstance(node, ast.Constant) and isinstance(node.value, str) else set()


def _prepass(tree: ast.AST) -> tuple[set[int], set[str]]:
    """What the rules need of the whole file before its nodes, in one walk: the docstrings' nodes
    (prose, not data, unless the file reads `__doc__`: then none are), and what names NumPy (the
    module's aliases, `import numpy as np`, and the data-moving functions imported from it)."""
    docstrings: set[int] = set()
    numpy: set[str] = set()
    reads_doc = False
    for node in ast.walk(tree):
        reads_doc = reads_doc or bool(_names(node) & {"__doc__", "getdoc"})  # `f.__doc__`, `inspect.getdoc(f)`
        if isinstance(node, ast.Import):
            numpy |= {a.asname or a.name for a in node.names if a.name.split(".")[0] == "numpy"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "numpy":
            numpy |= {a.asname or a.name for a in node.names if a.name in NUMPY_FUNCTIONS}
        elif isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docstrings.add(id(first.value))
    return (set() if reads_doc else docstrings), numpy


class _Scanner:
    """Applies every rule to every node of one file's tree, iteratively (ast.walk: no recursion)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.findings: list[Finding] = []
        self.seen: set[tuple[int, str, str]] = set()
        #: nodes a harmless read has accounted for (ast.walk meets a parent before its children)
        self.harmless: set[int] = set()

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 0)
        if (line, rule, message) not in self.seen:
            self.seen.add((line, rule, message))
            self.findings.append(Finding(file=self.file, line=line, rule=rule, message=message))

    def scan(self, tree: ast.AST) -> list[Finding]:
        self.docstrings, self.numpy_names = _prepass(tree)
        for node in ast.walk(tree):
            harmless = _harmless_env_read(node)
            if harmless is not None:
                self.harmless.add(id(harmless))
            if id(node) in self.harmless:
                continue
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self._module(node, alias.name)
            elif isinstance(node, ast.ImportFrom):
                self._module(node, node.module or "")
                for alias in node.names:
                    self._profiler_word(node, alias.name)
            elif isinstance(node, ast.Call):
                self._call(node)
            elif isinstance(node, ast.Attribute):
                self._attribute(node)
            elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    self._target(target)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in self.docstrings:
                for pattern, message in STRINGS.items():
                    if pattern.search(node.value):
                        self.add(node, "suspicious-string", message)
        return self.findings

    def _module(self, node: ast.AST, name: str) -> None:
        root = name.split(".")[0]
        if root in MODULES:
            self.add(node, *MODULES[root])
        self._generated_code(node, name)
        self._profiler_word(node, name)

    def _generated_code(self, node: ast.AST, name: str | None) -> None:
        for module, finding in GENERATED_CODE.items():
            if name is not None and (name == module or name.startswith(module + ".")):
                self.add(node, *finding)

    def _profiler_word(self, node: ast.AST, name: str) -> None:
        if any(word in name for word in PROFILER_WORDS):
            self.add(node, "profiler-access", f"uses the profiler ({name}): could switch it off or detect it")

    def _call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name in CALLS:
            self.add(node, *CALLS[name])
        self._generated_code(node, name)
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if (
            called in NUMPY_METHODS | NUMPY_TORCH
            or (called in NUMPY_FUNCTIONS and isinstance(owner, ast.Name) and owner.id in self.numpy_names)
            or (owner is None and called in self.numpy_names)
        ):
            self.add(node, *NUMPY_FINDING)
        if called in NAMESPACE_CALLS:
            self.add(node, "namespace", f"calls {called}() (namespaces and mounts are refused in the worker: issue 17)")
        elif any(isinstance(a, ast.Constant) and a.value in NAMESPACE_TOOLS for a in _first_items(node)):
            self.add(node, "namespace", "runs a namespace or mount tool (refused in the worker: issue 17)")
        if isinstance(node.func, ast.Attribute) and node.func.attr in (
            "read_text",
            "read_bytes",
            "write_text",
            "write_bytes",
            "open",
            "unlink",
            "rename",
            "replace",
            "symlink_to",
        ):
            if name not in CALLS:
                self.add(node, "file-access", f"calls .{node.func.attr}() (a file read or write through pathlib?)")
        # getattr(module, "name") hides an attribute from this scan
        if name in ("getattr", "setattr", "delattr") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Name) and first.id in PATCHED_ROOTS | {"inspect", "gc"}:
                self.add(node, "dynamic-attribute", f"{name}() on {first.id} (an attribute looked up by name)")

    def _attribute(self, node: ast.Attribute) -> None:
        # the chain is read only for the attributes a rule names: every link of a long chain is a node
        name = (_dotted(node) or "") if node.attr in ("environ", "environb", "modules") else ""
        if node.attr in ("environ", "environb") and name.startswith("os."):
            self.add(node, "env-probe", f"reads {name}")
        elif node.attr == "modules" and name == "sys.modules":
            self.add(node, "harness-access", "uses sys.modules (could reach the grader's loaded modules)")
        elif node.attr in ATTRIBUTES:
            self.add(node, *ATTRIBUTES[node.attr])
        elif node.attr == "data" and isinstance(node.value, ast.Attribute) and node.value.attr == "handle":
            self.add(node, *INTERPRETER_DATA)
        self._profiler_word(node, node.attr)

    def _target(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element)
            return
        if isinstance(target, ast.Subscript):
            base = _dotted(target.value) or ""
            if base in ("sys.modules", "__builtins__", "builtins.__dict__"):
                self.add(target, "monkeypatch", f"assigns into {base}")
            return
        name = _dotted(target) if isinstance(target, ast.Attribute) else None
        if name and name.split(".")[0] in PATCHED_ROOTS:
            self.add(target, "monkeypatch", f"assigns to {name} (patching a library, the grader or a timer)")


def _read_source(path: Path) -> bytes | str:
    """The file's bytes, or why they were not read: only regular files, never through a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return f"not read: {exc.strerror}"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > MAX_FILE_BYTES:
            return f"{st.st_size} bytes: too large to scan"
        return f.read(MAX_FILE_BYTES)


def _files(root: Path) -> tuple[list[Path], list[Finding]]:
    files: list[Path] = []
    notes: list[Finding] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                notes.append(
                    Finding(
                        file=rel,
                        line=0,
                        rule="symlink",
                        message=f"a symbolic link to {os.readlink(path)[:200]} (not copied for grading)",
                    )
                )
            elif name.endswith(NATIVE_SUFFIXES):
                notes.append(
                    Finding(
                        file=rel,
                        line=0,
                        rule="native-code",
                        message="a compiled library: native code the grader cannot inspect",
                    )
                )
            elif name.endswith(".py"):
                files.append(path)
            if len(files) >= MAX_FILES:
                return files, notes
    return files, notes


def scan_submission(path: Path) -> list[Finding]:
    """Findings for every Python file under `path` (plus links and native libraries), in order."""
    files, findings = _files(path)
    deadline = time.monotonic() + SCAN_BUDGET_S
    for file in files:
        rel = str(file.relative_to(path))
        if time.monotonic() > deadline:
            message = f"the scan stopped after {SCAN_BUDGET_S:g} s: this file and those after it were not scanned"
            findings.append(Finding(file=rel, line=0, rule="scan-budget", message=message))
            break
        source = _read_source(file)
        if isinstance(source, str):
            findings.append(Finding(file=rel, line=0, rule="unreadable", message=source))
            continue
        if source.startswith(ELF_MAGIC):
            findings.append(Finding(file=rel, line=0, rule="native-code", message="a compiled binary named .py"))
            continue
        try:
            tree = ast.parse(source, filename=rel)
        except SyntaxError as exc:
            findings.append(
                Finding(file=rel, line=exc.lineno or 0, rule="syntax-error", message=f"does not parse: {exc.msg}")
            )
            continue
        except (ValueError, RecursionError, MemoryError) as exc:
            findings.append(
                Finding(file=rel, line=0, rule="unreadable", message=f"could not be parsed: {type(exc).__name__}")
            )
            continue
        findings.extend(_Scanner(rel).scan(tree))
        if len(findings) >= MAX_FINDINGS:
            break
    return findings[:MAX_FINDINGS]
