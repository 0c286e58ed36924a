"""One shape's alternating windows (`shape_timing.alternate`), on scripted timings: when they stop,
what each asks for, and a throttled alternation timed again."""

from __future__ import annotations

import pytest

from grader.engine import protocol
from grader.engine.judge import gpu_state
from grader.engine.judge.stopping import MAX_ALTERNATIONS, MIN_ALTERNATIONS, NOTHING_EARNED_AFTER, Rule
from grader.engine.orchestrator import shape_timing
from grader.engine.spec.model import Thresholds

LINEAR = Thresholds(full_at=0.9, zero_at=0.3)


def rule(thresholds: Thresholds = LINEAR, points: float = 10.0, precision: float = 0.1, shapes: int = 2) -> Rule:
    return Rule(thresholds, points, precision, shapes)


class Script:
    """A fake pair of windows: the alternation's student and reference rounds from a list."""

    def __init__(self, pairs: list[tuple[list[float], list[float]]], wall_s: float | None = None) -> None:
        self.pairs, self.calls, self.wall_s = list(pairs), 0, wall_s
        self.windows: list[float] = []

    def __call__(self, worker_call, ref_calls, shape, window, last_rounds, label, quiet, window_s):  # type: ignore[no-untyped-def]
        student, reference = self.pairs[self.calls]
        self.calls += 1
        self.windows.append(window_s)
        wall = sum(student) if self.wall_s is None else self.wall_s
        return student, reference, protocol.Timed(samples_s=student, triton_launches=len(student)), {}, wall


class FakeMonitor:
    def __init__(self, slow: list[bool]) -> None:
        self.slow, self.n = slow, 0

    def sample(self) -> gpu_state.Sample:
        alternation = self.n // 2
        self.n += 1
        throttled = alternation < len(self.slow) and self.slow[alternation]
        return gpu_state.Sample(1980, 3201, 60, 500.0, 0x40 if throttled else 0x4)


def run(
    pairs: list[tuple[list[float], list[float]]],
    slow: list[bool],
    wall_s: float | None = None,
    thresholds: Thresholds = LINEAR,
) -> tuple[shape_timing.Rounds, Script]:
    script = Script(pairs, wall_s)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shape_timing, "_window_pair", script)
        rounds = shape_timing.alternate(None, [], {}, ("p", "s"), lambda: None, rule(thresholds), FakeMonitor(slow))  # type: ignore[arg-type]
    return rounds, script


def test_alternate_stops_a_hopeless_kernel_after_two() -> None:
    pairs = [([0.145] * 10, [0.0045] * 10)] * MAX_ALTERNATIONS
    rounds, script = run(pairs, [])
    assert script.calls == NOTHING_EARNED_AFTER and rounds.stopped == "settled"
    assert rounds.seen == 10 * NOTHING_EARNED_AFTER and len(rounds.checks) == NOTHING_EARNED_AFTER


def test_each_window_times_the_specs_window_s() -> None:
    pairs = [([0.145] * 10, [0.0045] * 10)] * MAX_ALTERNATIONS
    assert set(run(pairs, [])[1].windows) == {LINEAR.window_s}
    short = Thresholds(full_at=0.9, zero_at=0.3, window_s=0.125)
    assert set(run(pairs, [], thresholds=short)[1].windows) == {0.125}


def test_windows_that_hold_the_gpu_long_are_capped_whatever_their_timed_work() -> None:
    """A call that syncs every round: 0.25 s timed per window but 2 s of the GPU's hold (the
    cache-by-contents cheat on the H200). A noisy ratio would run to the most; the wall time held
    caps it at the minimum, the first window (warm-up, compiles) not counted."""
    noisy = [([0.001 * (1 + 0.2 * (i % 2))] * 250, [0.0003] * 250) for i in range(MAX_ALTERNATIONS)]
    rounds, script = run(noisy, [], wall_s=2.0)
    assert script.calls == MIN_ALTERNATIONS and rounds.stopped == "capped"
    assert rounds.student_wall_s == pytest.approx(2.0 * (MIN_ALTERNATIONS - 1))
    rounds, script = run(noisy, [], wall_s=0.3)  # the same ratios from windows that keep their budget
    assert script.calls == MAX_ALTERNATIONS and rounds.stopped == "most"


def test_a_throttled_alternation_is_timed_again_and_its_rounds_dropped() -> None:
    pairs = [([1.0] * 10, [0.01] * 10)] + [([0.1] * 10, [0.01] * 10)] * MAX_ALTERNATIONS
    rounds, script = run(pairs, [True, False, False, False])
    assert rounds.retimed == 1 and not rounds.throttled
    assert 1.0 not in rounds.student  # the throttled window's rounds are not scored
    assert rounds.seen == 10 * script.calls  # but the worker's round numbering counts them (checked rounds)
    assert [c[0] for c in rounds.checks] == [10 * i for i in range(script.calls)]


def test_an_alternation_that_stays_throttled_is_kept_and_marked() -> None:
    pairs = [([0.1] * 10, [0.01] * 10)] * (MAX_ALTERNATIONS + gpu_state.MAX_RETIMES)
    rounds, _ = run(pairs, [True] * (gpu_state.MAX_RETIMES + 1))
    assert rounds.throttled and rounds.retimed == gpu_state.MAX_RETIMES
    state = gpu_state.summary(rounds.samples, rounds.retimed, rounds.throttled)
    assert state is not None and state.throttled and "hw_thermal_slowdown" in state.throttle_reasons
