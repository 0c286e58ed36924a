"""FlashAttention's GPU memory at a benchmark shape, estimated on the CPU, and what to say when it is over.

One call is what the grader times (`FlashAttention.timed`): the forward, then
`torch.autograd.grad(out, (q, k, v), grad_out)`; q, k, v and grad_out are not counted, everything
allocated after them is (O, L, what the backward makes, dq, dk, dv). The estimate itself is the
generic one (grader/engine/problems/memory_estimate.py); this module names what usually breaks the
budget: Nq x Nk matrices (S, P, dP, dS) held for many heads at once.
"""

from __future__ import annotations

from grader.engine.problems.flash_attention.case import AttentionCase
from grader.engine.problems.memory_estimate import Allocation, Estimate, gib
from grader.engine.spec.model import Case

WRITEUP = "the write-up's section on the memory budget (assignment/README.md, 4. FlashAttention-2)"


def score_matrices(case: AttentionCase, at_peak: tuple[Allocation, ...]) -> list[Allocation]:
    """The allocations live at the peak whose last two dimensions are Nq x Nk (or Nk x Nq)."""
    square = {(case.nq, case.nk), (case.nk, case.nq)}
    return [a for a in at_peak if len(a.shape) >= 2 and tuple(a.shape[-2:]) in square and a.dtype != "bool"]


def over_budget_hint(case: Case, result: Estimate) -> str:
    """Why a FlashAttention call is over its budget, in the student's terms."""
    assert isinstance(case, AttentionCase)
    matrices = score_matrices(case, result.at_peak)
    if not matrices:
        return f"what is live at the peak: {result.largest()}; see {WRITEUP}"
    held = sum(a.nbytes for a in matrices)
    return (
        f"your backward holds {len(matrices)} Nq x Nk score matrices (S, P, dP, dS) at once, {gib(held)} of "
        f"the peak: {result.largest()}. Recompute P from L tile by tile (a Triton backward holds none), or "
        f"overwrite in place (P in S's memory, dS in dP's) and loop over fewer heads at a time; see {WRITEUP}"
    )
