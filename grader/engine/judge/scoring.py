"""Points: correctness per case weight, performance from the speed ratio, problem status."""

from __future__ import annotations

import math

from grader.engine.records import flags
from grader.engine.records.model import ProblemResult, Result, TestResult
from grader.engine.spec.model import Case, Problem, Thresholds

SHARE_UNIT = 1e-4  # case shares are kept to four decimals


def case_shares(points: float, weights: list[float]) -> list[float]:
    """`points` split by weight into shares of four decimals that add up to `points` exactly.

    Rounding each share on its own let one problem's eleven cases add up to 20.0002 of 20; the units
    left over after rounding down go to the largest remainders (ties: the earlier case).
    """
    total = sum(weights)
    if not total:
        return [0.0] * len(weights)
    units = round(points / SHARE_UNIT)
    raw = [units * w / total for w in weights]
    shares = [math.floor(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: (shares[i] - raw[i], i))[: units - sum(shares)]:
        shares[i] += 1
    return [round(u * SHARE_UNIT, 4) for u in shares]


def assign_case_points(problem: Problem, cases: list[Case], tests: list[TestResult], cheat: str | None) -> None:
    """Split the problem's correctness points over its cases by weight; a cheat earns nothing.

    A compile-only case checks no values, so it is worth nothing on its own: a softmax whose every
    value was wrong earned a compile-only case's share. Its share is paid in the proportion the
    problem's value-checked cases earned of theirs.
    """
    shares = case_shares(problem.points.correctness, [c.weight for c in cases])
    for share, case, test in zip(shares, cases, tests):
        test.max_score = share
        test.compile_only = case.compile_only
        if cheat and test.status == "passed":
            test.status, test.message = "failed", f"right values, but the kernel check failed: {cheat}"
        test.score = test.max_score if test.status == "passed" else 0.0
    _follow_checked_cases(tests)


def _follow_checked_cases(tests: list[TestResult]) -> None:
    """A passed compile-only case's score: its share times the fraction the value-checked cases earned."""
    checked = [t for t in tests if not t.compile_only]
    possible = sum(t.max_score for t in checked)
    fraction = sum(t.score for t in checked) / possible if possible else 0.0
    for test in tests:
        if test.compile_only and test.status == "passed":
            test.score = round(test.max_score * fraction, 4)
            test.message = (
                ""
                if test.score == test.max_score
                else f"compile-only: the kernels compile for the GPU; this case checks no values, so it earns "
                f"{fraction:.0%} of its points, the share the cases whose values are checked earned"
            )


def performance_fraction(thresholds: Thresholds, ratio: float) -> float:
    """Fraction of the performance points for a speed ratio t_reference / t_student."""
    if thresholds.tiers:
        reached = [t.fraction for t in thresholds.tiers if ratio >= t.ratio]
        return max(reached, default=0.0)
    if ratio >= thresholds.full_at:
        return 1.0
    if ratio <= thresholds.zero_at:
        return 0.0
    return (ratio - thresholds.zero_at) / (thresholds.full_at - thresholds.zero_at)


def finish_problem(result: ProblemResult, fatal: bool) -> ProblemResult:
    """Total the problem's score and set its status from its tests."""
    correctness = sum(t.score for t in result.tests)
    performance = result.performance.score if result.performance and result.performance.score is not None else 0.0
    result.score = round(correctness + performance, 4)
    graded = [t for t in result.tests if t.max_score > 0 or t.status != "skipped"]
    passed = [t for t in graded if t.status == "passed"]
    # a compile-only pass alone shows no right value
    checked = [t for t in passed if not t.compile_only] if any(not t.compile_only for t in graded) else passed
    if fatal or (graded and all(t.status == "error" for t in graded)):
        result.status = "error"
    elif not graded:
        result.status = "skipped"
    elif result.kernel_check is not None or not checked:
        result.status = "failed"
    elif len(passed) == len(graded):
        result.status = "passed"
    else:
        result.status = "partial"
    return result


def total(result: Result) -> Result:
    """The result's score, maximum and pending points from its problems: the one place they are
    added up, as a grading or a re-scoring finishes the record; its flags are kept with them."""
    problems = result.problems
    result.score = round(sum(p.score for p in problems), 4)
    result.max_score = sum(p.max_score for p in problems)
    result.pending_score = round(
        sum(p.performance.max_score for p in problems if p.performance and p.performance.status == "not_measured"), 4
    )
    return flags.settle(result)
