"""Score arithmetic: case weights, cheats, statuses, performance thresholds."""

from __future__ import annotations

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.judge.scoring import assign_case_points, finish_problem, performance_fraction
from grader.engine.records.model import Performance, ProblemResult, TestResult
from grader.engine.spec.model import DEFAULT_SPEC, Thresholds, Tier


def make_tests(*statuses: str) -> list[TestResult]:
    return [TestResult(name=f"t{i}", status=s, score=0, max_score=0) for i, s in enumerate(statuses)]  # type: ignore[arg-type]


def problem_result(tests: list[TestResult], perf_score: float | None = None) -> ProblemResult:
    perf = Performance(status="measured" if perf_score is not None else "not_measured", score=perf_score, max_score=5)
    return ProblemResult(name="gelu", score=0, max_score=15, status="skipped", tests=tests, performance=perf)


def test_points_split_by_weight_and_summed() -> None:
    problem = load_assignment(DEFAULT_SPEC).problem("gelu")
    cases = problem.suite_cases("cpu")
    tests = make_tests(*(["passed"] * (len(cases) - 1) + ["failed"]))
    assign_case_points(problem, cases, tests, cheat=None)
    assert sum(t.max_score for t in tests) == pytest.approx(problem.points.correctness)
    result = finish_problem(problem_result(tests), fatal=False)
    assert result.score == pytest.approx(problem.points.correctness * (len(cases) - 1) / len(cases), abs=1e-3)
    assert result.status == "partial"


def test_cheat_zeroes_every_case() -> None:
    problem = load_assignment(DEFAULT_SPEC).problem("gelu")
    cases = problem.suite_cases("cpu")
    tests = make_tests(*(["passed"] * len(cases)))
    assign_case_points(problem, cases, tests, cheat="called aten::gelu")
    assert all(t.score == 0 and t.status == "failed" and "aten::gelu" in t.message for t in tests)


def _softmax_cpu(*checked: str) -> tuple[list[TestResult], ProblemResult]:
    """The softmax CPU suite: the value-checked cases given `checked`, its compile-only case passed."""
    problem = load_assignment(DEFAULT_SPEC, hidden=False).problem("softmax")
    cases = problem.suite_cases("cpu")
    assert [c.compile_only for c in cases].count(True) == 1 and len(checked) == len(cases) - 1
    statuses = iter(checked)
    tests = make_tests(*("passed" if c.compile_only else next(statuses) for c in cases))
    assign_case_points(problem, cases, tests, cheat=None)
    return tests, finish_problem(problem_result(tests), fatal=False)


def test_a_compile_only_case_earns_nothing_on_its_own() -> None:
    """Every value wrong, the compile-only case compiled: 0 points and a failed problem (it was 1.15 / 25)."""
    tests, result = _softmax_cpu("failed", "failed", "failed")
    (compiled,) = [t for t in tests if t.compile_only]
    assert compiled.status == "passed" and compiled.max_score > 0 and compiled.score == 0
    assert "compile-only" in compiled.message and "0%" in compiled.message
    assert result.score == 0 and result.status == "failed"


def test_a_compile_only_case_earns_what_the_checked_cases_earn() -> None:
    tests, result = _softmax_cpu("passed", "passed", "failed")
    (compiled,) = [t for t in tests if t.compile_only]
    checked = [t for t in tests if not t.compile_only]
    fraction = sum(t.score for t in checked) / sum(t.max_score for t in checked)
    assert compiled.score == pytest.approx(compiled.max_score * fraction, abs=1e-4) and result.status == "partial"
    tests, result = _softmax_cpu("passed", "passed", "passed")
    assert all(t.score == t.max_score and not t.message for t in tests) and result.status == "passed"


@pytest.mark.parametrize(
    ("statuses", "fatal", "expected"),
    [
        (["passed", "passed"], False, "passed"),
        (["failed", "failed"], False, "failed"),
        (["error", "error"], False, "error"),
        (["passed", "error"], False, "partial"),
        (["passed"], True, "error"),
    ],
)
def test_problem_status(statuses: list[str], fatal: bool, expected: str) -> None:
    tests = make_tests(*statuses)
    for t in tests:
        t.max_score = 1
        t.score = 1 if t.status == "passed" else 0
    assert finish_problem(problem_result(tests), fatal=fatal).status == expected


def test_performance_points_add_only_when_measured() -> None:
    tests = make_tests("passed")
    tests[0].max_score = tests[0].score = 10
    assert finish_problem(problem_result(tests, perf_score=2.5), fatal=False).score == 12.5
    assert finish_problem(problem_result(make_tests("passed")), fatal=False).score == 0


def test_linear_thresholds() -> None:
    t = Thresholds(full_at=1.0, zero_at=0.5)
    assert performance_fraction(t, 1.3) == 1.0
    assert performance_fraction(t, 0.5) == 0.0
    assert performance_fraction(t, 0.75) == pytest.approx(0.5)


def test_tiers() -> None:
    t = Thresholds(tiers=[Tier(ratio=0.5, fraction=0.3), Tier(ratio=0.9, fraction=1.0)])
    assert performance_fraction(t, 0.4) == 0.0
    assert performance_fraction(t, 0.6) == 0.3
    assert performance_fraction(t, 0.95) == 1.0


def test_thresholds_must_be_ordered() -> None:
    with pytest.raises(ValueError):
        Thresholds(full_at=0.5, zero_at=0.9)


@pytest.mark.parametrize("cases", [1, 3, 7, 11, 13, 14])
def test_case_shares_add_up_to_the_points_exactly(cases: int) -> None:
    """Shares rounded one by one once gave eleven matmul cases 20.0002 of 20 points."""
    from grader.engine.judge.scoring import case_shares

    shares = case_shares(20, [1.0] * cases)
    assert round(sum(shares), 6) == 20.0
    assert max(shares) - min(shares) <= 1e-4 + 1e-12
    weighted = case_shares(15, [1.0, 2.0, 0.5])
    assert round(sum(weighted), 6) == 15.0 and weighted[1] > weighted[0] > weighted[2]
