"""The worker's share of the GPU's memory outside the benchmark shapes, as its errors say it.

A worker starts capped at part of the card (`SandboxConfig.gpu_memory_fraction`) so that gradings
beside it keep room for their calls; correctness shapes are small. At a benchmark shape the cap is
the shape's budget instead (grader/engine/harness/memory_budget.py), the same on every card.
"""

from __future__ import annotations

import torch

GIB = 1 << 30

_get_fraction = torch.cuda.get_per_process_memory_fraction


def describe() -> str:
    """What the worker may hold, said beside its out-of-memory error: a student reading only
    PyTorch's message would take the card's size for the limit."""
    try:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = _get_fraction(0)
    except (RuntimeError, AssertionError, AttributeError):  # pragma: no cover - no GPU after all
        return "a grading worker may use only part of the GPU's memory"
    return (
        f"a grading worker may use at most {fraction * total / GIB:.1f} GiB "
        f"({fraction:.0%} of the GPU's {total / GIB:.1f} GiB) for a correctness case; a benchmark shape "
        "may use its budget (the write-up's memory budgets)"
    )
