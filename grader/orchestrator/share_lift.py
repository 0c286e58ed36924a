"""When a worker's share of the GPU's memory is lifted, and what the grading says about it.

A call at a benchmark shape that runs out of memory under the worker's share (75% of the card)
is the grader's rule at work, not the student's error: the shape's timed requests then carry a
headroom, and the worker lifts its share to all that is free on the card but that headroom
(grader/harness/memory_share.py). Only an out-of-memory error after the lift is the student's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from grader.orchestrator import trace

if TYPE_CHECKING:
    from grader.orchestrator.problem_run import ProblemRun

#: what a timing request is, as the output says it
WHAT = {
    "warm": "its first call",
    "time": "a timed window",
    "loop": "the wall-clock check",
    "profile": "the profiled call",
}


def share_short(run: ProblemRun, shape: str, op: str) -> None:
    """A call (`op`) at `shape` ran out of memory under the share: the problem's timed requests
    lift it. Said in the output, as the grader's, so a student knows why the shape was fine."""
    run.lift_share = True
    what = WHAT.get(op, "a call")
    run.output.append(
        f"--- grader ---\n{shape}: {what} ran out of GPU memory under the worker's share of the card; "
        "the shape is timed with the GPU held alone and the share lifted to what is free"
    )
    trace.note(0.0, run.problem.name, shape, f"{what}: out of memory under the share, lifted for timing")


def headroom() -> int:
    """What the grader keeps of the GPU when a worker's share is lifted: the reference side times
    in the same window (its sets and working memory are cached by then) and loads CUDA modules."""
    return max(1 << 30, int(0.03 * torch.cuda.get_device_properties(0).total_memory))
