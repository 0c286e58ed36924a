"""What a benchmark shape's memory budget means to the grading: peaks kept, shortfalls placed.

The worker applies each shape's budget (grader/engine/harness/memory_budget.py). Here the grading reads
its replies: a first call beside other gradings that runs out of memory, or finds the card unable
to give the budget, is made again with the GPU held alone (others' calls may have held it); in
the exclusive window an out-of-memory error under a budget the card could give is the student's,
and a budget the card cannot give makes the shape ungradable here: the machine's fact, never a zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.engine import protocol
from grader.engine.orchestrator import trace

if TYPE_CHECKING:
    from grader.engine.orchestrator.problem_run import ProblemRun

GIB = 1 << 30


def first_call_short(run: ProblemRun, shape: str, reply: protocol.Failed | protocol.Unavailable) -> None:
    """A first call at `shape` beside other gradings ran out of memory or found the budget taken:
    said in the output, as the grader's; the timing makes the call again with the GPU alone."""
    what = "found its memory budget taken" if isinstance(reply, protocol.Unavailable) else "ran out of GPU memory"
    run.output.append(
        f"--- grader ---\n{shape}: its first call, beside other gradings, {what}; it is made again with the GPU "
        "held alone, where only the shape's budget limits it"
    )
    trace.note(0.0, run.problem.name, shape, f"first call: {what}, made again alone")


def unavailable(run: ProblemRun, reply: protocol.Unavailable) -> str:
    """The card could not give a shape's budget in the exclusive window: the problem is ungradable
    here (other processes' memory is contention, which a batch grades again alone)."""
    if not reply.never:
        run.contended = "out_of_memory"
    where = "on this GPU" if reply.never else "beside the other processes on this GPU"
    run.ungradable = f"not gradable {where}: {reply.message}"
    return run.ungradable


def note_peak(run: ProblemRun, shape: str, peak_bytes: int | None) -> None:
    """The most one reply at `shape` measured: the record keeps the largest."""
    if peak_bytes is not None:
        run.peaks[shape] = max(run.peaks.get(shape, 0), peak_bytes)
