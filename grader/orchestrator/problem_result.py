"""A graded problem's record, from what its run gathered: case points, the kernel check, the status."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader.judge import scoring
from grader.records.model import Performance, Phases, ProblemResult, TestResult

if TYPE_CHECKING:
    from grader.orchestrator.problem_run import ProblemRun


def build(run: ProblemRun, tests: list[TestResult], performance: Performance, duration: float) -> ProblemResult:
    """The problem's ProblemResult: its cases' points assigned, a failed kernel check as a test."""
    problem, cases = run.problem, run.cases
    scoring.assign_case_points(problem, cases, tests, cheat=run.cheat)
    if run.cheat:
        name = f"{problem.name}: kernel check"
        tests.append(TestResult(name=name, status="failed", score=0, max_score=0, message=run.cheat))
    result = ProblemResult(
        name=problem.name,
        title=problem.title,
        writeup_section=problem.writeup_section,
        score=0.0,
        max_score=problem.max_score,
        status="skipped",
        message=run.cheat or run.fatal or ("" if tests else run.ungradable or ""),
        tests=tests,
        performance=performance,
        output="\n".join(run.output),  # bounded by the record (grader/records/text.py)
        duration_s=round(duration, 3),
        kernel_check=run.cheat,
        phases=Phases(**{k: round(v, 3) for k, v in run.phases.model_dump().items()}),
        contended=run.contended,
        ungradable=run.ungradable,
    )
    if not cases:
        result.message = f"no {'GPU' if run.device == 'cuda' else 'CPU'} cases: not yet part of the assignment"
    return scoring.finish_problem(result, fatal=run.fatal is not None)
