"""How long a shape is timed: until its ratio is known well enough for the points it earns.

A shape is timed in alternations (a window of the student's rounds, then one of the
reference's). Each alternation gives a ratio; their spread gives a 95% confidence interval of
the shape's ratio (Student's t on the logs: clock drift between alternations is the noise that
matters, and it lands on both sides of one alternation alike). Timing stops when more rounds
could not change the grade:

- "settled": the points are the same at both ends of the interval (at or above `full_at`, at
  or below `zero_at`, or inside one tier): a FlashAttention at 0.03 of the reference earns
  nothing after two alternations as surely as after sixty rounds;
- "precise": the interval's width, in points, is below the spec's precision (a tenth of a point
  by default);
- "capped": the student's side has had STUDENT_CAP_S of timed work, or its windows held the GPU
  that long (a slow kernel, or a call whose host side dwarfs its GPU time);
- "most": MAX_ALTERNATIONS, today's fixed count, whatever the interval says.

Never before MIN_ALTERNATIONS (but "settled" with nothing earned: after NOTHING_EARNED_AFTER), and
never (but at the most or the cap) while the shape's interval
could move its problem's ratio by more than NOISE, unless nothing is earned at either end of it:
a ratio above `full_at` earns nothing more but still ranks on the leaderboard and is read as the
grader's noise. Three alternations kept most shapes within 2%, but not the power-capped mlp-up
matmul of the reference against itself on the H200: stopped at three as "precise" (its share
of the geomean's points was small), its ratio swung 0.91-1.10 between gradings and took the
problem's geomean to 0.97-1.04 (docs/gpu-runs/2026-12-02-session-11-class.md). Pure functions
of numbers: tests/grader/engine/judge/test_stopping.py holds them with synthetic timings.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from grader.engine.judge.scoring import performance_fraction
from grader.engine.spec.model import Thresholds

MIN_ALTERNATIONS = 3
#: a shape whose interval earns nothing at either end stops after two alternations: two ratios
#: give a wide interval (Student's t with one degree of freedom: 12.7 standard errors), so one
#: still wholly at or below `zero_at` is far below it, and a third alternation of a slow kernel
#: (a FlashAttention at 0.05 of the reference: 0.4-0.7 s of the GPU held alone) cannot earn it
#: a point; the reference against itself never earns nothing, so its noise is as before
NOTHING_EARNED_AFTER = 2
#: the half-width of a problem's geomean interval the shapes are timed down to: the reference
#: against itself within 0.98-1.02 (each shape's share: NOISE * sqrt(shapes), independent shapes)
NOISE = 0.02
MAX_ALTERNATIONS = 6
#: seconds of the student's timed rounds per shape past which no new alternation starts
STUDENT_CAP_S = 3.0
#: two-sided 95% quantiles of Student's t by degrees of freedom (1..10); 1.96 past that
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def log_half_width(ratios: list[float]) -> float:
    """Half the 95% interval of the mean of log(ratio) over alternations (inf with fewer than two)."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    if len(logs) < 2:
        return math.inf
    return t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))


def interval(ratio: float, ratios: list[float]) -> tuple[float, float]:
    """The interval around the shape's ratio (its median over median), as wide as the spread allows."""
    half = log_half_width(ratios)
    if not math.isfinite(half):
        return 0.0, math.inf
    return ratio * math.exp(-half), ratio * math.exp(half)


def points(thresholds: Thresholds, max_points: float, ratio: float) -> float:
    return max_points * performance_fraction(thresholds, ratio)


@dataclass(frozen=True)
class Rule:
    """What one problem's shapes are held to (the spec's thresholds, points and precision)."""

    thresholds: Thresholds
    max_points: float
    precision: float
    shapes: int  # the problem's benchmark shapes: one shape moves the geomean by 1/shapes of its log

    def verdict(self, ratio: float, ratios: list[float], student_s: float) -> str | None:
        """Why timing of this shape may stop now, or None to time another alternation."""
        done = len(ratios)
        if done < NOTHING_EARNED_AFTER:
            return None
        low, high = interval(ratio, ratios)
        at_low, at_high = points(self.thresholds, self.max_points, low), points(self.thresholds, self.max_points, high)
        if at_high == 0.0:
            return "settled"  # nothing earned at either end: more rounds cannot matter
        if done < MIN_ALTERNATIONS:
            return None
        spread = log_half_width(ratios)
        if spread > NOISE * math.sqrt(self.shapes):
            return "most" if done >= MAX_ALTERNATIONS else "capped" if student_s >= STUDENT_CAP_S else None
        if at_low == at_high:
            return "settled"
        # this shape's share of the geomean's interval, read as points around its own ratio
        half = spread / self.shapes
        width = points(self.thresholds, self.max_points, ratio * math.exp(half)) - points(
            self.thresholds, self.max_points, ratio * math.exp(-half)
        )
        if width < self.precision:
            return "precise"
        if done >= MAX_ALTERNATIONS:
            return "most"
        if student_s >= STUDENT_CAP_S:
            return "capped"
        return None


def score_interval(
    thresholds: Thresholds, max_points: float, geomean: float, half_widths: list[float]
) -> tuple[float, float]:
    """The points the shapes' intervals allow: the geomean's log interval, its shapes taken as independent."""
    if not half_widths or not all(math.isfinite(h) for h in half_widths):
        return 0.0, max_points
    half = math.sqrt(sum(h * h for h in half_widths)) / len(half_widths)
    return (
        round(points(thresholds, max_points, geomean * math.exp(-half)), 4),
        round(points(thresholds, max_points, geomean * math.exp(half)), 4),
    )
