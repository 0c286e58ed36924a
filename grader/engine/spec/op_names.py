"""Which recorded op names the kernel rule reads, in one place for the worker's recording
(grader/engine/harness/calls.py keeps them) and the trusted kernel check (grader/engine/judge/checks.py).

The rule is an allow-list (`KernelRule.allowed_ops`): a watched call may dispatch allocation, views,
copies and casts, named one by one, and nothing else. An op is allowed by its exact recorded name:
an in-place spelling (`aten::tanh_`), a `_foreach_` or `special_` variant, an op of another of
PyTorch's namespaces (`mkldnn::_linear_pointwise`, `prepacked::linear_clamp_run`) is simply not on
the list, so no rule about spellings or namespaces is needed. The worker records an op of any
namespace PyTorch registered (not the submission's own `torch.library.custom_op("mylib::...")`,
whose body runs PyTorch's ops, which are recorded).
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


def not_allowed(ops: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """The recorded `ops` the allow-list does not name, in their order, each once."""
    listed = set(allowed)
    return list(dict.fromkeys(op for op in ops if op not in listed))
