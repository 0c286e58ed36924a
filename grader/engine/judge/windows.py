"""The rules of one shape's timed windows: how much each times, how long one may hold the GPU, which round is watched.

A shape is timed in alternations, each a window of the student's rounds (in the worker) and then
one of the reference's (in the orchestrator: grader/engine/orchestrator/shape_timing.py runs them, and
the stopping rule, grader/engine/judge/stopping.py, says when they are enough). What a window asks for
and what stops it are here, as numbers and pure functions.
"""

from __future__ import annotations

from typing import Any

from grader.engine import protocol, timing
from grader.engine.problems.base import round_seed

# Short alternations, each with a floor of timed work: a compute-bound kernel near the tensor cores' peak makes
# the GPU's clocks wander (5-10% spread on an H200), and only fine interleaving puts both sides
# on the same part of that wander. Two alternations of 10+ rounds measured one such shape at
# 0.91-0.93 of itself; the grader's own noise target is 0.97-1.03.
# The timed work per side and alternation is the spec's `thresholds.window_s` (0.25 s by default).
MIN_S = 0.05  # at least this much timed work per side and alternation (the spec's window_s is no shorter)
#: the host's seconds a student window may take past its warm-up, in windows' timed work: the
#: budget counts timed work, and a call that syncs each round held the GPU 2 s per window for
#: 0.25 s of it (session 12)
WINDOW_WALL = 4

#: the most one timing request (a window, the wall-clock check's loop) may hold the GPU alone: the
#: shape's compiling happened before the window (grader/engine/orchestrator/first_calls.py), so what is
#: left is the autotuners' benchmarking and the rounds (seconds); without a bound, a call that
#: never returns when timed held the GPU, and so the class, for its problem's whole limit (600 s)
REQUEST_LIMIT_S = 60.0

_WATCH_SALT = 0x57A7C4ED  # the watched chunk's draw, apart from the sampled rounds' (problems.base.chosen)


def request_limit_reason(request: protocol.Message) -> str:
    """Why timing stopped when a request ran past REQUEST_LIMIT_S (the record's reason)."""
    what = "the wall-clock check's loop" if isinstance(request, protocol.LoopRequest) else "a timed window"
    return (
        f"{what} ran past {REQUEST_LIMIT_S:g} s with the GPU held alone (the first calls at this shape had "
        f"returned beside other gradings): a call that does not return when timed?"
    )


def watch_round(shape: dict[str, Any], window: int, last_rounds: int) -> int | None:
    """Before which round of student window `window` (from 0) a chunk is watched: drawn from the
    secret's seeds among about as many rounds as the last window ran; none in the first window,
    whose first call is watched already."""
    if window == 0:
        return None
    base = shape.get("verify_seed") or shape["seed"]
    return round_seed(base ^ _WATCH_SALT, window) % max(last_rounds, timing.FEWEST_ROUNDS)
