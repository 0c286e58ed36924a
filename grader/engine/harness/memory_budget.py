"""A benchmark shape's GPU memory budget, applied in the worker: the same limit on every card.

The spec gives each benchmark shape a budget (`gpu_memory_gib`): what one call of the submission
may allocate at that shape beyond its inputs. At a shape's requests the worker's allocator is
capped at exactly what it holds for the grader (the shape's input sets) plus that budget plus a
fixed slack for the grader's own buffers (the L2 flush, the sampled outputs), whatever the card:
an 80 GB H100 and a 141 GB H200 run the submission under the same limit, so the same code fits on
both or on neither. Before the cap, the card is asked whether it can give that much now; when it
cannot (a smaller card, or other processes holding memory) the request is answered "unavailable"
and the shape is the machine's to grade again, never the student's zero
(grader/engine/orchestrator/memory_budget.py decides which). The peak the calls allocated beyond their
inputs is measured and sent back with the reply: the record keeps it beside the time.

The allocator maps segments that grow in place (`expandable_segments`), set before the first
allocation: with PyTorch's default segments a backward that frees and allocates blocks of many
sizes strands memory (15.7 GiB reserved but unallocated on the H100, session of 2026-12-07), and a
budget would then depend on the allocator's history rather than on what the code holds.
"""

from __future__ import annotations

import torch

GIB = 1 << 30
#: room the cap keeps above the budget for the grader's own allocations in a timed window (the L2
#: flush buffer is twice the L2: 100 MiB on an H100, 120 on an H200) and the allocator's 2 MiB pages
SLACK = 512 << 20

# bound before the submission is imported: one that replaces them cannot lift its own cap
_empty_cache, _mem_get_info, _reserved = torch.cuda.empty_cache, torch.cuda.mem_get_info, torch.cuda.memory_reserved
_allocated, _max_allocated = torch.cuda.memory_allocated, torch.cuda.max_memory_allocated
_reset_peak, _synchronize = torch.cuda.reset_peak_memory_stats, torch.cuda.synchronize
_set_fraction, _initialized = torch.cuda.set_per_process_memory_fraction, torch.cuda.is_initialized
_allocator_settings = (
    getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
)


class BudgetUnavailable(Exception):
    """The card cannot give the shape's budget now: the grading machine's fact, not the submission's."""

    def __init__(self, message: str, never: bool) -> None:
        super().__init__(message)
        #: True: this card could not give it even alone (too small); False: other processes hold it
        self.never = never


def expandable_segments() -> None:
    """Segments that grow in place, for every allocation the worker makes (called before CUDA's first)."""
    _allocator_settings("expandable_segments:True")


class Budget:
    """One shape's cap: applied after the grader's input sets are made, measured around the calls."""

    def __init__(self, budget_bytes: int, shape: str) -> None:
        self.budget, self.shape = budget_bytes, shape
        self.base = 0

    def apply(self) -> None:
        """Cap the allocator at what the grader holds now plus the budget and the slack; raise
        BudgetUnavailable when the card cannot give that much."""
        _synchronize()
        _empty_cache()
        self.base = _allocated()
        want = self.base + self.budget + SLACK
        free, total = _mem_get_info()
        can = free + _reserved()
        if want > can:
            never = want > total
            who = (
                f"this GPU has {total / GIB:.1f} GiB in all"
                if never
                else f"{can / GIB:.1f} GiB of the GPU's {total / GIB:.1f} GiB was free for this worker "
                f"(other processes held the rest)"
            )
            raise BudgetUnavailable(
                f"{self.shape}: its budget of {self.budget / GIB:g} GiB (with the grader's "
                f"{(self.base + SLACK) / GIB:.1f} GiB beside it) could not be given: {who}",
                never,
            )
        _set_fraction(min(1.0, want / total))
        _reset_peak()

    def peak(self) -> int:
        """Bytes the calls allocated beyond what the grader held when the cap was applied."""
        _synchronize()
        return max(_max_allocated() - self.base, 0)

    def describe(self) -> str:
        """What an out-of-memory error at this shape is said with."""
        return (
            f"at {self.shape} one call may allocate {self.budget / GIB:g} GiB beyond its inputs (the shape's "
            "GPU memory budget in the spec, the same on every card), and this call asked for more: see the "
            "write-up's memory budgets; `pytest handout` estimates your peak on the CPU"
        )


def applied(budget_bytes: int | None, shape: str, active: list[Budget]) -> Budget | None:
    """The shape's budget applied (None: the request has none), and made the `active` one, which
    an out-of-memory error is said with."""
    if budget_bytes is None:
        return None
    budget = Budget(budget_bytes, shape)
    budget.apply()
    active[:] = [budget]
    return budget


def release_cached() -> None:
    """Give back the allocator's cached blocks after a call: the worker is stopped until its next
    call, and what it caches meanwhile is memory another grading's shape may need."""
    if _initialized():
        _empty_cache()
