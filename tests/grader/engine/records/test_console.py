"""The terminal's tables: a compile-only case counted apart from the cases whose values are checked."""

from __future__ import annotations

from rich.console import Console

from grader.engine.records.console import first_reasons, passed_cell, print_result
from grader.engine.records.model import AssignmentRef, ProblemResult, Result, RunEnvironment, SubmissionRef, TestResult


def _tests() -> list[TestResult]:
    checked = [TestResult(name=f"softmax: c{i}", status="failed", score=0, max_score=5) for i in range(3)]
    compiled = TestResult(name="softmax: big", status="passed", score=0, max_score=5, compile_only=True)
    return [*checked, compiled]


def test_compile_only_cases_are_counted_apart() -> None:
    assert passed_cell(_tests()) == "0 / 3 + 1 / 1 compile-only"
    assert passed_cell(_tests()[:2]) == "0 / 2"


def test_the_table_shows_the_compile_only_count() -> None:
    result = Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3"),
        score=0,
        max_score=20,
        duration_s=1,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[ProblemResult(name="softmax", score=0, max_score=20, status="failed", tests=_tests())],
    )
    console = Console(record=True, width=200)
    print_result(result, console)
    assert "1 / 1 compile-only" in console.export_text()


def test_each_problem_that_did_not_pass_gives_its_first_reason() -> None:
    tests = _tests()
    tests[1].message = "values differ: 3 of 64 elements\nfirst at [0, 3]"
    passed = ProblemResult(name="gelu", score=10, max_score=10, status="passed", tests=[])
    crashed = ProblemResult(name="matmul", score=0, max_score=10, status="error", message="the worker crashed")
    failed = ProblemResult(name="softmax", score=0, max_score=20, status="failed", tests=tests)
    result = Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3"),
        score=10,
        max_score=40,
        duration_s=1,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[passed, failed, crashed],
    )
    assert first_reasons(result) == [
        "softmax: failed (softmax: c1): values differ: 3 of 64 elements",
        "matmul: error: the worker crashed",
    ]
