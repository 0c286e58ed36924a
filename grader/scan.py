"""A static scan of the submission for known cheat patterns.

Findings are evidence for a human reading the report, never a verdict: a student may have a
good reason to read a file. The verdicts come from running the code (fresh inputs, profiling).
"""

from __future__ import annotations

import ast
from pathlib import Path

from grader.records import Finding

CALLS = {
    "sys._getframe": ("frame-walk", "reads interpreter frames (could look for the grader's expected outputs)"),
    "inspect.currentframe": ("frame-walk", "reads interpreter frames"),
    "inspect.stack": ("frame-walk", "reads interpreter frames"),
    "gc.get_objects": ("gc-walk", "walks the garbage collector's objects"),
    "gc.get_referrers": ("gc-walk", "walks the garbage collector's objects"),
    "os.getenv": ("env-probe", "reads environment variables"),
    "os.system": ("process", "starts a shell command"),
    "os.fork": ("process", "forks the process"),
    "os.kill": ("process", "sends signals to processes"),
    "os._exit": ("exit", "ends the process abruptly"),
    "sys.exit": ("exit", "ends the process"),
    "open": ("file-access", "opens a file"),
    "setattr": ("monkeypatch", "sets attributes dynamically (could patch torch, triton or timers)"),
    "__import__": ("dynamic-import", "imports a module by name at run time"),
    "importlib.import_module": ("dynamic-import", "imports a module by name at run time"),
    "torch.autograd.profiler._is_profiler_enabled": ("profiler-probe", "checks whether it is being profiled"),
}
MODULES = {
    "subprocess": ("process", "imports subprocess"),
    "multiprocessing": ("process", "imports multiprocessing"),
    "ctypes": ("native-code", "imports ctypes (raw memory access)"),
    "socket": ("network", "imports socket"),
    "urllib": ("network", "imports urllib"),
    "requests": ("network", "imports requests"),
    "grader": ("grader-import", "imports the grader's own modules"),
    "reference": ("reference-import", "imports the staff reference"),
    "threading": ("threads", "imports threading (work left running after the call returns?)"),
}
PATCHED_ROOTS = {"torch", "triton", "time", "sys", "os", "builtins", "grader", "numpy", "np", "gc"}
STRINGS = {"/proc": "mentions /proc", "reference/": "mentions the reference folder", "GRADER_": "mentions grader settings", "hidden_cases": "mentions hidden cases"}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, file: str) -> None:
        self.file = file
        self.findings: list[Finding] = []

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.findings.append(Finding(file=self.file, line=getattr(node, "lineno", 0), rule=rule, message=message))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            root = alias.name.split(".")[0]
            if root in MODULES:
                self.add(node, *MODULES[root])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        root = (node.module or "").split(".")[0]
        if root in MODULES:
            self.add(node, *MODULES[root])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name in CALLS:
            self.add(node, *CALLS[name])
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = _dotted(node)
        if name in ("os.environ",):
            self.add(node, "env-probe", "reads os.environ")
        if node.attr in ("f_back", "f_locals", "f_globals", "tb_frame"):
            self.add(node, "frame-walk", f"uses the frame attribute {node.attr}")
        self.generic_visit(node)

    def _check_target(self, target: ast.AST) -> None:
        name = _dotted(target) if isinstance(target, ast.Attribute) else None
        if name and name.split(".")[0] in PATCHED_ROOTS:
            self.add(target, "monkeypatch", f"assigns to {name} (patching a library or timer)")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._check_target(target)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            for needle, message in STRINGS.items():
                if needle in node.value:
                    self.add(node, "suspicious-string", message)


def scan_submission(path: Path) -> list[Finding]:
    findings: list[Finding] = []
    for file in sorted(path.rglob("*.py")):
        rel = str(file.relative_to(path))
        try:
            tree = ast.parse(file.read_text(encoding="utf-8", errors="replace"), filename=rel)
        except SyntaxError as exc:
            findings.append(Finding(file=rel, line=exc.lineno or 0, rule="syntax-error", message=f"does not parse: {exc.msg}"))
            continue
        except (OSError, ValueError) as exc:
            findings.append(Finding(file=rel, line=0, rule="unreadable", message=str(exc)))
            continue
        visitor = _Visitor(rel)
        visitor.visit(tree)
        findings.extend(visitor.findings)
    return findings[:200]
