"""The worker's share of the GPU's memory: the cap it starts under, and its lift with the GPU alone.

A worker starts capped at part of the card (`SandboxConfig.gpu_memory_fraction`) so that gradings
beside it keep room for their calls. The cap is the grader's rule, not the student's: an honest
solution that fits the card but not the share (a FlashAttention whose PyTorch backward holds the
16x16384x16384 scores, say: 59.4 GiB of an 80 GB H100 was not enough) is timed again in the
exclusive window with the cap lifted to all that is free on the card but the grader's headroom.
Only an out-of-memory error there is the student's. The lifted worker's allocator also maps
segments that grow in place (`expandable_segments`), as a student's own run on a card it holds
alone may: PyTorch's default segments strand freed blocks of one size that a later, larger
allocation cannot use.
"""

from __future__ import annotations

import torch

GIB = 1 << 30

# bound before the submission is imported: one that replaces them cannot turn the lift into a no-op
_empty_cache, _mem_get_info, _reserved = torch.cuda.empty_cache, torch.cuda.mem_get_info, torch.cuda.memory_reserved
_get_fraction, _set_fraction = torch.cuda.get_per_process_memory_fraction, torch.cuda.set_per_process_memory_fraction
_initialized = torch.cuda.is_initialized
# torch 2.11's name; the older one (deprecated since) where a course pins an earlier torch
_allocator_settings = (
    getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
)

#: set once the share is lifted: (bytes the worker may hold, bytes the grader kept)
_lifted: tuple[int, int] | None = None


def lift(headroom: int) -> None:
    """Let this worker hold all the GPU's free memory but `headroom` bytes (the grader's reference
    side); never less than it may hold now. Once per worker: emptying the cache again on every
    request would make each timed window's first rounds allocate afresh."""
    global _lifted
    if _lifted is not None:
        return
    # segments that grow in place: a backward that frees and allocates blocks of many sizes left
    # 15.7 GiB reserved but unallocated on the H100, the difference between fitting and not
    _allocator_settings("expandable_segments:True")
    _empty_cache()
    free, total = _mem_get_info()
    held = _reserved()
    fraction = min(1.0, max(_get_fraction(0), (held + free - headroom) / total))
    _set_fraction(fraction)
    _lifted = (int(fraction * total), headroom)


def release_cached() -> None:
    """Give back the allocator's cached blocks after a correctness call: the worker is stopped
    until its next call, and what it caches then is memory another grading's timed shape (its
    share lifted) could use."""
    if _initialized():
        _empty_cache()


def describe() -> str:
    """What the worker may hold, said beside its out-of-memory error: a student reading only
    PyTorch's message would take the card's size for the limit."""
    try:
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = _get_fraction(0)
    except (RuntimeError, AssertionError, AttributeError):  # pragma: no cover - no GPU after all
        return "a grading worker may use only part of the GPU's memory"
    if _lifted is not None:
        may, kept = _lifted
        return (
            f"with the GPU held alone this worker could use {may / GIB:.1f} GiB of the GPU's "
            f"{total / GIB:.1f} GiB (all that was free but {kept / GIB:.1f} GiB kept for the grader): "
            "the shape does not fit"
        )
    return (
        f"a grading worker may use at most {fraction * total / GIB:.1f} GiB "
        f"({fraction:.0%} of the GPU's {total / GIB:.1f} GiB) beside other gradings; a benchmark shape "
        "that runs out of it is timed again with the GPU held alone and the share lifted"
    )
