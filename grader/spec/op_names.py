"""Which recorded op names stand for PyTorch computing, in one place for the worker's recording
(grader/harness/calls.py keeps them) and the trusted kernel check (grader/judge/checks.py).

A problem lists its forbidden ops by their `aten::` names. The profiler records an in-place call
under its own name (`aten::tanh_` for `x.tanh_()`), and PyTorch's compute libraries have operator
namespaces of their own (`mkldnn::_linear_pointwise` is a matmul with a fused GeLU), which no
`aten::` list can name: both are matched here, so that the list means the computation, not a
spelling of it.
"""

from __future__ import annotations

from collections.abc import Iterable

#: PyTorch's compute libraries as operator namespaces: an op there is PyTorch computing
BACKEND_NAMESPACES = ("mkldnn::", "mkl::", "onednn::", "quantized::", "_quantized::", "xnnpack::", "sparse::")
#: the recorded ops a kernel check reads: PyTorch's own, and its libraries'
RECORDED = ("aten::", *BACKEND_NAMESPACES)


def base(op: str) -> str:
    """`aten::tanh_` -> `aten::tanh`: an in-place call is the op it updates with (`aten::__iand__` stays)."""
    return op[:-1] if op.endswith("_") and not op.endswith("__") else op


def forbidden_in(ops: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    """The recorded `ops` that compute what `forbidden` names, in place or out of it, or in one of
    PyTorch's compute libraries."""
    listed = set(forbidden)
    return [op for op in ops if op in listed or base(op) in listed or op.startswith(BACKEND_NAMESPACES)]
