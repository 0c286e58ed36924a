"""Gradescope's results.json, built from a pydantic model of its format (its submission metadata
is read by `grader.course.batch.gradescope_metadata`).

The format is Gradescope's "Autograder Specifications" (gradescope-autograders.readthedocs.io,
specs): a top-level score, output, output_format and visibility; tests with name, score,
max_score, status ("passed"/"failed"), output and visibility; leaderboard entries with name,
value and order. A test without score and max_score counts for nothing and shows no verdict:
that is how a "not measured" performance test appears, never as a failed 0 / 5.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grader.engine.records import flags
from grader.engine.records.model import ProblemResult, Result, geomean

OutputFormat = Literal["text", "html", "simple_format", "md", "ansi"]
#: why a submission got no grade (results.json's extra_data.failure); run_autograder writes the
#: first and the last two in bash, where no Python can be trusted to run
FailureKind = Literal["environment", "no_submission", "grading_crashed", "grader_failed", "time_limit"]
Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]


class GradescopeModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GradescopeTest(GradescopeModel):
    name: str
    score: float | None = None
    max_score: float | None = None
    status: Literal["passed", "failed"] | None = None
    output: str = ""
    output_format: OutputFormat = "text"
    visibility: Visibility = "visible"
    tags: list[str] = Field(default_factory=list)


class LeaderboardEntry(GradescopeModel):
    name: str
    value: float | str
    order: Literal["asc", "desc"] = "desc"


class GradescopeResults(GradescopeModel):
    score: float
    execution_time: int | None = None
    output: str = ""
    output_format: OutputFormat = "text"
    test_output_format: OutputFormat = "text"
    visibility: Visibility = "visible"
    stdout_visibility: Visibility = "hidden"
    extra_data: dict[str, Any] = Field(default_factory=dict)
    tests: list[GradescopeTest] = Field(default_factory=list)
    leaderboard: list[LeaderboardEntry] | None = None


def pts(x: float) -> float:
    """Two decimals: what a person reads (39.9998 -> 40.0)."""
    return round(x + 0.0, 2)


def _visibility(test_visibility: str) -> Visibility:
    return "visible" if test_visibility == "public" else "after_published"


def _performance_test(problem: ProblemResult) -> GradescopeTest | None:
    perf = problem.performance
    if perf is None:
        return None
    name = f"{problem.name}: performance"
    if perf.status == "not_measured":
        pending = f"{pts(perf.max_score):g} points pending: not measured here (neither zero nor full)"
        return GradescopeTest(
            name=f"{name} (not measured)",
            output=f"{perf.reason}\n{pending}".strip(),
            tags=["performance", "not measured"],
        )
    lines = []
    if perf.ratio_geomean:
        lines.append(f"speedup against the staff reference (geometric mean): ×{perf.ratio_geomean:.3f}")
    lines += [f"{s.name}: ×{s.ratio:.3f}" for s in perf.shapes if s.ratio]
    if perf.reason:
        lines.append(perf.reason)
    if perf.review:
        lines.append(f"under review by the course staff (your points stand): {perf.review}")
    earned = pts(perf.score or 0.0)
    return GradescopeTest(
        name=name,
        score=earned,
        max_score=pts(perf.max_score),
        status="passed" if perf.status == "measured" and earned > 0 else "failed",
        output="\n".join(lines),
        tags=["performance"],
    )


def _leaderboard(result: Result) -> list[LeaderboardEntry] | None:
    ratios = {
        p.name: p.performance.ratio_geomean
        for p in result.problems
        if p.performance and p.performance.status == "measured" and p.performance.ratio_geomean
    }
    if not ratios or any(f.blocking for f in flags.of(result)):
        return None
    entries = [LeaderboardEntry(name=name, value=round(value, 4)) for name, value in ratios.items()]
    entries.append(LeaderboardEntry(name="overall speedup", value=round(geomean(list(ratios.values())), 4)))
    return entries


def _summary_output(result: Result) -> str:
    """The top of the student's page: the score, or why there is none; then what staff will look at."""
    if result.status == "error":
        lines = [
            "NOT GRADED: your submission could not be graded, so the score above is not a grade.",
            f"Reason: {result.error.strip() or 'unknown'}",
            "Fix the problem and submit again, or ask the course staff.",
        ]
    else:
        lines = [f"{pts(result.score):g} / {pts(result.max_score):g}"]
        if result.pending_score:
            lines.append(f"{result.pending_note()}: not measured here, neither zero nor full")
    found = flags.of(result)
    if found:
        lines.append("Flags for the course staff: " + "; ".join(f.label for f in found))
    lines += result.warnings
    return "\n".join(lines)


def build(result: Result, notes: list[str] | None = None) -> GradescopeResults:
    """Gradescope's results.json for one graded (or ungradable) submission; `notes` end its output."""
    tests: list[GradescopeTest] = []
    for problem in result.problems:
        for test in problem.tests:
            tests.append(
                GradescopeTest(
                    name=f"{test.name} (compile-only)" if test.compile_only else test.name,
                    score=pts(test.score),
                    max_score=pts(test.max_score),
                    status="passed" if test.status == "passed" else "failed",
                    output=(test.case + "\n" + test.message).strip(),
                    visibility=_visibility(test.visibility),
                    tags=[problem.name],
                )
            )
        perf = _performance_test(problem)
        if perf is not None:
            tests.append(perf)
    return GradescopeResults(
        score=pts(result.score),
        execution_time=int(result.duration_s),
        output="\n".join([_summary_output(result), *(notes or [])]),
        extra_data={
            "status": result.status,
            "flags": [f.label for f in flags.of(result)],
            "sha256": result.submission.sha256,
            "assignment_version": result.assignment.version,
        },
        tests=tests,
        leaderboard=_leaderboard(result),
    )


def results_json(result: Result, notes: list[str] | None = None) -> str:
    return build(result, notes).model_dump_json(indent=2, exclude_none=True)


def not_graded(kind: FailureKind, reason: str) -> str:
    """results.json for a submission that got no grade: score 0, said to be no grade, and why."""
    return GradescopeResults(
        score=0.0,
        output=f"NOT GRADED: your submission could not be graded, so the score above is not a grade.\nReason: {reason}",
        extra_data={"status": "error", "failure": kind},
    ).model_dump_json(indent=2, exclude_none=True)


def as_dict(result: Result) -> dict[str, Any]:
    return json.loads(results_json(result))
