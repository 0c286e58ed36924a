"""Where in a submission's files a PyTorch op the kernel rule does not allow is likely called: the
kernel check's "file:line".

The profiler names the aten op a call ran (`aten::softmax`), not the line that ran it: the Python
stack of every op would cost each correctness call a stack walk per op. The op's name, though,
nearly always appears in the call that runs it (`torch.softmax(x, -1)`, `x.softmax(-1)`,
`F.gelu(y)`), and a matrix product is `@` or one of a few names. So the submission's own files
are read (never imported) for calls and operators that run the op, and the message lists them.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: aten ops whose Python spellings have other names than the op itself
_ALSO = {
    "mm": {"matmul", "mm", "einsum", "linear", "@"},
    "bmm": {"matmul", "bmm", "einsum", "@"},
    "addmm": {"matmul", "addmm", "linear", "@"},
    "matmul": {"matmul", "einsum", "@"},
    "_softmax": {"softmax"},
    "_log_softmax": {"log_softmax"},
    "scaled_dot_product_attention": {"scaled_dot_product_attention"},
    "_scaled_dot_product_flash_attention": {"scaled_dot_product_attention"},
    "_scaled_dot_product_efficient_attention": {"scaled_dot_product_attention"},
}
#: arithmetic operators and the aten ops they run on tensors: named only where no call names the op
#: (`grid = (B * H,)` multiplies Python ints)
_OPERATORS = {ast.Mult: "mul", ast.Add: "add", ast.Sub: "sub", ast.Div: "div", ast.Pow: "pow", ast.MatMult: "matmul"}
MAX_SITES = 5
MAX_FILES = 200


def _spellings(ops: list[str]) -> set[str]:
    names: set[str] = set()
    for op in ops:
        base = op.removeprefix("aten::").split(".")[0]
        names |= {base, base.lstrip("_")} | _ALSO.get(base, set())
    return names


def _in_kernels(tree: ast.AST) -> set[int]:
    """Nodes inside `@triton.jit` functions: `tl.softmax` there is Triton's, not PyTorch's."""
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in fn.decorator_list):
            inside |= {id(n) for n in ast.walk(fn)}
    return inside


def op_call_sites(submission: Path, ops: list[str]) -> list[str]:
    """`file:line` of the calls in the submission that likely run one of `ops` (at most MAX_SITES)."""
    names = _spellings(ops)
    sites: list[str] = []
    operators: list[str] = []
    for path in sorted(submission.rglob("*.py"))[:MAX_FILES]:
        try:
            tree = ast.parse(path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue
        rel = path.relative_to(submission).as_posix()
        kernels = _in_kernels(tree)
        for node in ast.walk(tree):
            called = None
            if id(node) in kernels:
                continue
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                called = "@"
            elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _OPERATORS:
                if _OPERATORS[type(node.op)] in names:
                    operators.append(f"{rel}:{node.lineno}")
            if called in names:
                sites.append(f"{rel}:{getattr(node, 'lineno', 0)}")
    found = sites or operators
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))[:MAX_SITES]
