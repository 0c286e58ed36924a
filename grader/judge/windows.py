"""One shape's timed windows: the student's rounds and the reference's, alternating, until the ratio is known.

Each alternation is a window of the student's rounds (in the worker) and then one of the
reference's (here). The stopping rule (grader/judge/stopping.py) decides after each alternation
whether another would change the grade; NVML's samples at the edges of an alternation
(grader/judge/gpu_state.py) decide whether it was throttled and must be timed again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grader import protocol, timing
from grader.judge import gpu_state, stopping
from grader.orchestrator import trace
from grader.problems.base import round_seed

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
#: shape's compiling happened before the window (grader/orchestrator/first_calls.py), so what is
#: left is the autotuners' benchmarking and the rounds (seconds); without a bound, a call that
#: never returns when timed held the GPU, and so the class, for its problem's whole limit (600 s)
REQUEST_LIMIT_S = 60.0

_WATCH_SALT = 0x57A7C4ED  # the watched chunk's draw, apart from the sampled rounds' (problems.base.chosen)

#: sends one timing request to the student's worker: its reply (an error raises) and payload
WorkerCall = Callable[[protocol.TimeRequest | protocol.LoopRequest], tuple[protocol.Timed | protocol.Looped, Any]]


@dataclass
class Rounds:
    """What the alternating timed windows of one shape gave: both sides' samples and what to check."""

    student: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)
    #: per kept alternation: the ratio of its reference median to its student median
    ratios: list[float] = field(default_factory=list)
    #: per student window (kept or not): its first round's index in the worker, its rounds, what
    #: was checked and the sampled outputs
    checks: list[tuple[int, int, list[protocol.VerifiedRound], Any]] = field(default_factory=list)
    seen: int = 0  # rounds the worker has timed for this shape, thrown-away windows included
    #: per student window: (Triton launches the worker counted, rounds timed)
    launches: list[tuple[int, int]] = field(default_factory=list)
    #: the chunks of timed rounds the worker ran again under the profiler (grader.harness.timed_watch)
    watched: list[protocol.WatchedChunk] = field(default_factory=list)
    stopped: str = ""
    samples: list[gpu_state.Sample | None] = field(default_factory=list)
    retimed: int = 0
    throttled: bool = False
    #: the student windows' wall time as the orchestrator saw it, the first window's excepted
    student_wall_s: float = 0.0

    @property
    def ratio(self) -> float:
        return timing.Measurement(self.reference).median_ms / timing.Measurement(self.student).median_ms


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


def _window_pair(
    worker_call: WorkerCall,
    ref_calls: list[Any],
    shape: dict[str, Any],
    window: int,
    last_rounds: int,
    label: tuple[str, ...],
    quiet: Callable[[], None],
    window_s: float,
) -> tuple[list[float], list[float], protocol.Timed, Any, float]:
    # the first timed call is also profiled, and a chunk of each later window: the kernel check
    # applies to what is timed too
    first = window == 0
    request = protocol.TimeRequest(
        **shape,
        budget_s=window_s,
        min_s=MIN_S,
        warm=first,
        profile=first,
        watch_round=watch_round(shape, window, last_rounds),
        max_wall_s=WINDOW_WALL * window_s,
    )
    with trace.span(*label, "student"):
        asked = time.monotonic()
        reply, payload = worker_call(request)
        wall = time.monotonic() - asked
    assert isinstance(reply, protocol.Timed)  # what a time request gets back (an error raises)
    for step, seconds in list(reply.host_s.items())[:8]:
        trace.note(seconds, *label, f"student, in the worker: {step[:40]}")
    samples = list(reply.samples_s)
    with trace.span(*label, "reference"):
        quiet()  # the worker is stopped while the reference is timed
        reference = timing.measure(ref_calls, window_s, warm=False, min_s=MIN_S).samples_s
    return samples, reference, reply, payload, wall


def alternate(
    worker_call: WorkerCall,
    ref_calls: list[Any],
    shape: dict[str, Any],
    label: tuple[str, str],
    quiet: Callable[[], None],
    rule: stopping.Rule,
    monitor: gpu_state.Monitor,
) -> Rounds:
    """Alternations until the rule stops them; a throttled one is timed again (MAX_RETIMES), then marked."""
    rounds = Rounds()
    retimes_here = 0
    while True:
        step = (*label, f"alternation {len(rounds.ratios) + 1}")
        before = monitor.sample()
        last = rounds.checks[-1][1] if rounds.checks else 0
        student, reference, reply, payload, wall = _window_pair(
            worker_call, ref_calls, shape, len(rounds.checks), last, step, quiet, rule.thresholds.window_s
        )
        if rounds.checks:  # the first window's warm-up and compiles are not the kernel's time
            rounds.student_wall_s += wall
        after = monitor.sample()
        count = reply.rounds_run if reply.rounds_run is not None else len(student)
        rounds.checks.append((rounds.seen, count, list(reply.verified), payload))
        rounds.launches.append((reply.triton_launches, count))
        if reply.profile is not None:  # the shape's first timed call, watched before the window's rounds
            rounds.watched.append(protocol.WatchedChunk(**reply.profile.model_dump(), first_round=-1, rounds=1))
        rounds.watched += reply.watched
        rounds.seen += count
        rounds.samples += [before, after]
        if not student or not reference or any(not (s > 0) for s in student + reference):
            rounds.student += student
            rounds.stopped = "no times"
            return rounds
        if gpu_state.slowed(before, after):
            if retimes_here < gpu_state.MAX_RETIMES:
                retimes_here += 1
                rounds.retimed += 1
                continue
            rounds.throttled = True
        retimes_here = 0
        rounds.student += student
        rounds.reference += reference
        rounds.ratios.append(timing.Measurement(reference).median_ms / timing.Measurement(student).median_ms)
        # the cap counts the GPU's time held for the student, not only what the events timed
        verdict = rule.verdict(rounds.ratio, rounds.ratios, max(sum(rounds.student), rounds.student_wall_s))
        if verdict:
            rounds.stopped = verdict
            return rounds
