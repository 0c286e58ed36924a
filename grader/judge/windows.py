"""One shape's timed windows: the student's rounds and the reference's, alternating, until the ratio is known.

Each alternation is a window of the student's rounds (in the worker) and then one of the
reference's (here). The stopping rule (grader/judge/stopping.py) decides after each alternation
whether another would change the grade; NVML's samples at the edges of an alternation
(grader/judge/gpu_state.py) decide whether it was throttled and must be timed again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grader import protocol, timing
from grader.judge import gpu_state, stopping
from grader.orchestrator import trace

# Short alternations, each with a floor of timed work: a compute-bound kernel near the tensor cores' peak makes
# the GPU's clocks wander (5-10% spread on an H200), and only fine interleaving puts both sides
# on the same part of that wander. Two alternations of 10+ rounds measured one such shape at
# 0.91-0.93 of itself; the grader's own noise target is 0.97-1.03.
BUDGET_S = 0.25  # per side and alternation
MIN_S = 0.05  # at least this much timed work per side and alternation

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
    stopped: str = ""
    samples: list[gpu_state.Sample | None] = field(default_factory=list)
    retimed: int = 0
    throttled: bool = False

    @property
    def ratio(self) -> float:
        return timing.Measurement(self.reference).median_ms / timing.Measurement(self.student).median_ms


def _window_pair(
    worker_call: WorkerCall,
    ref_calls: list[Any],
    shape: dict[str, Any],
    first: bool,
    label: tuple[str, ...],
    quiet: Callable[[], None],
) -> tuple[list[float], list[float], tuple[int, list[protocol.VerifiedRound], Any, int]]:
    # the first timed call is also profiled: the kernel check applies to what is timed too
    with trace.span(*label, "student"):
        reply, payload = worker_call(
            protocol.TimeRequest(**shape, budget_s=BUDGET_S, min_s=MIN_S, warm=first, profile=first)
        )
    assert isinstance(reply, protocol.Timed)  # what a time request gets back (an error raises)
    samples = list(reply.samples_s)
    with trace.span(*label, "reference"):
        quiet()  # the worker is stopped while the reference is timed
        reference = timing.measure(ref_calls, BUDGET_S, warm=False, min_s=MIN_S).samples_s
    return samples, reference, (len(samples), list(reply.verified), payload, reply.triton_launches)


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
        student, reference, (count, verified, payload, launched) = _window_pair(
            worker_call, ref_calls, shape, not rounds.checks, step, quiet
        )
        after = monitor.sample()
        rounds.checks.append((rounds.seen, count, verified, payload))
        rounds.launches.append((launched, count))
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
        verdict = rule.verdict(rounds.ratio, rounds.ratios, sum(rounds.student))
        if verdict:
            rounds.stopped = verdict
            return rounds
