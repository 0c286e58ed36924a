"""The stopping rule of a shape's timing, on synthetic timings: a grade is never changed by stopping early."""

from __future__ import annotations

import math
import random

from grader.engine.judge import gpu_state, stopping
from grader.engine.judge.stopping import MAX_ALTERNATIONS, MIN_ALTERNATIONS, NOTHING_EARNED_AFTER, Rule
from grader.engine.spec.model import Thresholds, Tier

LINEAR = Thresholds(full_at=0.9, zero_at=0.3)


def rule(thresholds: Thresholds = LINEAR, points: float = 10.0, precision: float = 0.1, shapes: int = 2) -> Rule:
    return Rule(thresholds, points, precision, shapes)


def noisy(ratio: float, spread: float, n: int, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [ratio * math.exp(rng.gauss(0.0, spread)) for _ in range(n)]


def test_never_before_the_minimum_however_clear() -> None:
    for done in range(1, MIN_ALTERNATIONS):
        assert rule().verdict(0.6, [0.6] * done, student_s=0.1) is None  # points earned: three at least
        assert rule().verdict(1.0, [1.0] * done, student_s=0.1) is None  # the full points too
    assert rule().verdict(0.03, [0.03], student_s=0.1) is None  # one alternation has no interval


def test_far_below_zero_at_is_settled_after_two() -> None:
    """A FlashAttention at 0.03 of the reference earns nothing after two alternations as after sixty rounds."""
    ratios = noisy(0.03, 0.05, NOTHING_EARNED_AFTER)
    assert rule().verdict(0.03, ratios, student_s=0.5) == "settled"


def test_two_alternations_settle_nothing_earned_only_when_far_below() -> None:
    """Two ratios give a wide interval (t with one degree of freedom): near `zero_at` it reaches
    above it, so the third alternation is timed; far below, it does not."""
    assert rule().verdict(0.27, [0.26, 0.28], student_s=0.3) is None
    assert rule().verdict(0.27, [0.26, 0.28, 0.27], student_s=0.3) == "settled"
    assert rule().verdict(0.1, [0.098, 0.102], student_s=0.3) == "settled"


def test_at_or_above_full_at_is_settled() -> None:
    ratios = noisy(1.0, 0.01, MIN_ALTERNATIONS, seed=1)
    assert rule().verdict(1.0, ratios, student_s=0.3) == "settled"


def test_an_interval_that_straddles_full_at_is_not_settled() -> None:
    ratios = [0.85, 0.95, 0.90]
    assert rule(precision=0.001).verdict(0.9, ratios, student_s=0.3) is None


def test_inside_one_tier_is_settled() -> None:
    tiers = Thresholds(tiers=[Tier(ratio=0.5, fraction=0.5), Tier(ratio=1.0, fraction=1.0)])
    assert rule(tiers).verdict(0.7, [0.695, 0.70, 0.705], student_s=0.3) == "settled"
    assert rule(tiers).verdict(0.5, [0.45, 0.50, 0.55], student_s=0.3) is None


def test_a_steady_ratio_between_the_thresholds_stops_when_precise() -> None:
    steady = noisy(0.6, 0.0005, MIN_ALTERNATIONS, seed=2)
    assert rule().verdict(0.6, steady, student_s=0.3) == "precise"


def test_a_noisy_ratio_between_the_thresholds_runs_to_the_most() -> None:
    ratios = noisy(0.6, 0.05, MAX_ALTERNATIONS - 1, seed=3)
    assert rule().verdict(0.6, ratios, student_s=0.3) is None
    ratios = noisy(0.6, 0.05, MAX_ALTERNATIONS, seed=3)
    assert rule().verdict(0.6, ratios, student_s=0.3) == "most"


def test_a_slow_kernel_is_capped() -> None:
    ratios = noisy(0.6, 0.05, MIN_ALTERNATIONS, seed=4)
    assert rule().verdict(0.6, ratios, student_s=stopping.STUDENT_CAP_S) == "capped"
    assert rule().verdict(0.6, ratios, student_s=stopping.STUDENT_CAP_S / 2) is None


def test_the_interval_holds_the_ratio_and_narrows_with_agreement() -> None:
    wide = stopping.interval(0.6, [0.5, 0.7, 0.6])
    narrow = stopping.interval(0.6, [0.59, 0.61, 0.60])
    assert wide[0] < narrow[0] < 0.6 < narrow[1] < wide[1]
    assert stopping.interval(0.6, [0.6]) == (0.0, math.inf)


def test_stopping_early_never_changes_the_points() -> None:
    """Over many synthetic shapes, the points at the early stop equal those after MAX_ALTERNATIONS
    whenever the stop was 'settled' (both ends of the interval give the same points)."""
    for seed in range(200):
        rng = random.Random(seed)
        true = rng.choice([0.02, 0.1, 0.25, 0.28, 0.32, 0.95, 1.1, 1.6])
        ratios = noisy(true, 0.01, MAX_ALTERNATIONS, seed)
        for done in range(NOTHING_EARNED_AFTER, MAX_ALTERNATIONS + 1):
            seen = ratios[:done]
            ratio = math.exp(sum(map(math.log, seen)) / done)
            if rule().verdict(ratio, seen, student_s=0.1) == "settled":
                assert stopping.points(LINEAR, 10, ratio) == stopping.points(LINEAR, 10, true)
                break


def test_score_interval_spans_the_points_the_ratios_allow() -> None:
    low, high = stopping.score_interval(LINEAR, 10, 0.6, [0.02, 0.02])
    assert low < stopping.points(LINEAR, 10, 0.6) < high
    assert stopping.score_interval(LINEAR, 10, 1.2, [0.01]) == (10.0, 10.0)
    assert stopping.score_interval(LINEAR, 10, 0.6, [math.inf]) == (0.0, 10)


def test_no_nvml_no_state_and_no_slowdown() -> None:
    assert gpu_state.summary([None, None], 0, False) is None
    assert not gpu_state.slowed(None, None)
    assert gpu_state.Monitor().sample() is None or gpu_state.Monitor().nvml is not None


def test_a_noisy_shape_above_full_at_is_timed_until_its_ratio_is_known() -> None:
    """The reference against itself on a power-capped shape (H200: 0.91-1.10 between gradings when
    stopped at three): more alternations, up to the most, until the interval is inside the noise."""
    wide = [0.97, 1.12, 1.05]  # all of it earns the full points, but the ratio is unknown to +-15%
    assert rule(shapes=3).verdict(1.04, wide, student_s=0.3) is None
    assert rule(shapes=3).verdict(1.04, wide * 2, student_s=0.3) == "most"
    assert rule(shapes=3).verdict(1.04, wide, student_s=stopping.STUDENT_CAP_S) == "capped"
    tight = [1.00, 1.01, 1.005]
    assert rule(shapes=3).verdict(1.005, tight, student_s=0.3) == "settled"


def test_nothing_earned_at_either_end_needs_no_more_precision() -> None:
    assert rule().verdict(0.05, [0.04, 0.06, 0.05], student_s=0.3) == "settled"


def test_the_reference_against_itself_stays_within_the_noise() -> None:
    """Synthetic problems of three shapes, one of them as noisy as the H200's mlp-up (7% per
    alternation): their geomean ratio stays within 0.98-1.02 in about 95% of gradings (a 95%
    interval's share; the rule without the noise floor: 43 of these 300 outside)."""
    spreads, outside = (0.005, 0.07, 0.01), 0
    for seed in range(300):
        logs = []
        for i, spread in enumerate(spreads):
            ratios = noisy(1.0, spread, MAX_ALTERNATIONS, seed * 7 + i)
            for done in range(MIN_ALTERNATIONS, MAX_ALTERNATIONS + 1):
                seen = ratios[:done]
                ratio = math.exp(sum(map(math.log, seen)) / done)
                if rule(shapes=3).verdict(ratio, seen, student_s=0.3):
                    break
            logs.append(math.log(ratio))
        outside += not 0.98 <= math.exp(sum(logs) / 3) <= 1.02
    assert outside <= 24, outside
