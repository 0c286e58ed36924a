"""One benchmark shape timed, with the GPU held alone: the student's windows and the reference's, alternating.

Each alternation is a window of the student's rounds (in the worker, through `WorkerCall`) and
then one of the reference's (here). The stopping rule (grader/engine/judge/stopping.py) decides after
each alternation whether another would change the grade; NVML's samples at the edges of an
alternation (grader/engine/judge/gpu_state.py) decide whether it was throttled and must be timed again.
Then a loop of the student's calls is timed by the orchestrator's own clock, and PyTorch once.
What the numbers mean is the judge's, which this module drives and never the reverse: the
windows' sizes and limits (grader/engine/judge/windows.py), the flags and the score
(grader/engine/judge/performance.py), the sampled rounds' checks (grader/engine/judge/round_checks.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.engine import protocol, timing
from grader.engine.judge import gpu_state, performance, pytorch_anchor, round_checks, stopping, windows
from grader.engine.judge.roofline import achieved, roofline_floor_s
from grader.engine.orchestrator import trace
from grader.engine.records.model import ShapeTiming
from grader.engine.spec.model import Case

PYTORCH_BUDGET_S = 0.4
#: the wall-clock check's loop, in the shape's windows of timed work (thresholds.window_s)
WALL_CHECK_WINDOWS = 1.0

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
    #: the chunks of timed rounds the worker ran again under the profiler (grader.engine.harness.timed_watch)
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
        min_s=windows.MIN_S,
        warm=first,
        profile=first,
        watch_round=windows.watch_round(shape, window, last_rounds),
        max_wall_s=windows.WINDOW_WALL * window_s,
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
        reference = timing.measure(ref_calls, window_s, warm=False, min_s=windows.MIN_S).samples_s
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


def _wall_clock(
    worker_call: WorkerCall, shape: dict[str, Any], median_s: float, label: tuple[str, str], window_s: float
) -> tuple[int, float, float, int]:
    """A loop of the student's calls timed by the orchestrator's clock: (rounds, reported s, wall s,
    Triton launches)."""
    # three rounds at least: a 150 ms step's five took 0.76 s of the exclusive window, and the check
    # allows the request's own overhead (the pipe, a busy host) up to a round's time with three;
    # at most 200: a fast kernel's loop is then shorter than a window
    rounds = max(3, min(200, int(WALL_CHECK_WINDOWS * window_s / max(median_s, 1e-6))))
    start = time.monotonic()
    loop, _ = worker_call(protocol.LoopRequest(**shape, rounds=rounds))
    wall = time.monotonic() - start
    assert isinstance(loop, protocol.Looped)  # what a loop request gets back (an error raises)
    trace.note(wall, *label, f"wall-clock check, {rounds} rounds")
    return rounds, loop.wall_s, wall, loop.triton_launches


def measure_shape(
    worker_call: WorkerCall,
    side: performance.ReferenceSide,
    case: Case,
    seeds: performance.ShapeSeeds,
    gpu: str,
    quiet: Callable[[], None] = lambda: None,
    rule: stopping.Rule | None = None,
) -> tuple[ShapeTiming, round_checks.ShapeChecks | None]:
    """Time one benchmark shape on both sides; flags say why a time cannot be trusted, and the
    sampled rounds' checks are returned to be run once the GPU is no longer held alone.

    `quiet` pauses the worker before the reference is timed (the worker's next call resumes it),
    so nothing the submission left running shares the GPU with the reference's rounds. The
    student's rounds get new contents between rounds and a sample of them is checked once all
    are timed (checking never shares the GPU with timing). The reference, which is trusted, keeps
    its rotating sets: new contents are written outside the timed events and L2 is flushed after
    them, so what a round times is the same on both sides (measured on the H200, with and
    without: docs/performance.md), and refilling both sides cost 1.9 s of a 45 s grading.
    """
    kind = side.kind
    label = (side.problem.name, case.name)
    checking = performance.verified_timing()  # read once: the request and the checks must agree
    anchor = pytorch_anchor.key_for(side.problem.name, case.model_dump_json())
    pytorch_ms = pytorch_anchor.lookup(anchor)
    with trace.span(*label, "reference and PyTorch: inputs, warm-up"):
        ref_calls, torch_calls, ref_sets = side.calls(case, seeds.inputs)
        quiet()
        timing.warm_up(ref_calls)
        if pytorch_ms is None:
            timing.warm_up(torch_calls)
    shape = performance.shape_request(case, seeds, checking)
    rule = rule or performance.rule_for(side.problem)
    rounds = alternate(worker_call, ref_calls, shape, label, quiet, rule, gpu_state.monitor())
    if pytorch_ms is None:
        with trace.span(*label, "PyTorch"):
            pytorch_ms = timing.measure(torch_calls, PYTORCH_BUDGET_S, warm=False).median_ms
        pytorch_anchor.keep(anchor, pytorch_ms)
    del ref_calls, torch_calls, ref_sets
    if not rounds.student or any(not (s == s) or s <= 0 for s in rounds.student):
        return ShapeTiming(
            name=case.name, case=kind.describe(case), flags=["the worker reported no usable times"]
        ), None
    flags = performance.launch_flags(rounds.launches) + performance.watched_flags(side.problem, case, rounds.watched)
    torch.cuda.empty_cache()
    s_meas, r_meas = timing.Measurement(rounds.student), timing.Measurement(rounds.reference)
    s_med = s_meas.median_ms / 1e3
    looped, reported, wall, launched = _wall_clock(worker_call, shape, s_med, label, rule.thresholds.window_s)
    flags += performance.clock_flags(s_med, roofline_floor_s(kind, case, gpu), looped, reported, wall)
    flags += [] if flags else performance.launch_flags([(launched, looped)], label="the wall-clock check's loop")
    value, unit = achieved(kind, case, s_med)
    ratio = rounds.ratio
    low, high = stopping.interval(ratio, rounds.ratios)
    timed = ShapeTiming(
        name=case.name,
        case=kind.describe(case),
        student_ms=round(s_meas.median_ms, 5),
        student_spread_ms=round(s_meas.iqr_ms, 5),
        reference_ms=round(r_meas.median_ms, 5),
        reference_spread_ms=round(r_meas.iqr_ms, 5),
        pytorch_ms=round(pytorch_ms, 5),
        ratio=round(ratio, 4),
        ratio_low=round(low, 4) if math.isfinite(high) else None,
        ratio_high=round(high, 4) if math.isfinite(high) else None,
        alternations=len(rounds.ratios),
        stopped=rounds.stopped,
        gpu_state=gpu_state.summary(rounds.samples, rounds.retimed, rounds.throttled),
        achieved=round(value, 2),
        achieved_unit=unit,
        rounds=len(rounds.student),
        verified_rounds=sum(len(v) for _, _, v, _ in rounds.checks),
        flags=flags,
    )
    later = round_checks.ShapeChecks(side, case, seeds, rounds.checks, timed) if checking else None
    if later is not None and later.held_bytes() > round_checks.DEFERRED_CHECK_BYTES:
        check_rounds(later)  # more samples than an honest worker sends: not kept until the window closes
        later = None
    return timed, later


def check_rounds(checks: round_checks.ShapeChecks) -> list[str]:
    """A timed shape's sampled rounds checked (`ShapeChecks.run`), the time it took traced."""
    with trace.span(checks.side.problem.name, checks.case.name, "checking the sampled timed rounds"):
        return checks.run()
