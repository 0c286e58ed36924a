"""Which recorded op names stand for PyTorch computing, in one place for the worker's recording
(grader/harness/calls.py keeps them) and the trusted kernel check (grader/judge/checks.py).

A problem lists its forbidden ops by their `aten::` names. The profiler records an in-place call
under its own name (`aten::tanh_` for `x.tanh_()`), and PyTorch has operator namespaces besides
`aten` (its compute libraries': `mkldnn::_linear_pointwise` is a matmul with a fused GeLU,
`prepacked::linear_clamp_run` XNNPACK's linear; `quantized::`, `prims::`, `inductor::`...), which
no `aten::` list can name: both are matched here, so that the list means the computation, not a
spelling of it. The worker records an op of any namespace PyTorch registered (not the submission's
own, `torch.library.custom_op("mylib::...")`); every one outside `aten` is forbidden.
"""

from __future__ import annotations

from collections.abc import Iterable

#: PyTorch's namespaces whose ops compute nothing a kernel could stand for: the profiler's ranges
NOT_COMPUTING = frozenset({"aten", "profiler"})


def pytorch_namespaces(op_names: Iterable[str]) -> set[str]:
    """The operator namespaces of `op_names` (PyTorch's registered ops) that are not `aten`'s and compute."""
    return {name.partition("::")[0] for name in op_names if "::" in name} - NOT_COMPUTING


def recorded(name: str, namespaces: Iterable[str]) -> bool:
    """Whether an event's `name` is an op the kernel check reads: `aten::`, or one of `namespaces`
    (but the profiler's own)."""
    space, sep, _ = name.partition("::")
    return bool(sep) and (space == "aten" or (space in namespaces and space not in NOT_COMPUTING))


#: spellings of an op that compute it all the same: over a list of tensors at once (one fused kernel
#: on a GPU, `torch._foreach_tanh`), and `torch.special`'s names (`special_erf` is `erf`)
VARIANT_PREFIXES = ("_foreach_", "special_")


def base(op: str) -> str:
    """The op a recorded name computes: `aten::tanh_` (in place) and `aten::_foreach_tanh_` are
    `aten::tanh`, `aten::special_expm1` is `aten::expm1` (`aten::__iand__` stays)."""
    space, sep, name = op.partition("::")
    if name.endswith("_") and not name.endswith("__"):
        name = name[:-1]
    for prefix in VARIANT_PREFIXES:
        name = name.removeprefix(prefix)
    return f"{space}{sep}{name}"


def forbidden_in(ops: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    """The recorded `ops` that compute what `forbidden` names, in place or out of it, or in one of
    PyTorch's other namespaces (the worker records only PyTorch's)."""
    listed = set(forbidden)
    return [op for op in ops if op in listed or base(op) in listed or not op.startswith("aten::")]
