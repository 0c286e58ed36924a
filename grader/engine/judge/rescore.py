"""Re-scoring stored results after the spec's points or thresholds changed: no kernel runs.

A result.json keeps every case's verdict and every benchmark shape's timing, so new points,
case weights or thresholds can be applied to it exactly as grading would have. Whether that is
enough is decided by the spec fingerprint (grader/engine/judge/fingerprint.py): the same `grading` hash means
the verdicts still hold; a different one means the submission must be graded again.

`grader rescore GRADES [--spec FILE]` does this on demand; `grader batch` does it by itself when
it resumes over results whose spec changed, and says which students it re-scored or regraded.
A Gradescope run's result takes a GPU batch's performance the same way (`with_gpu_performance`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from grader.engine.judge import scoring
from grader.engine.judge.fingerprint import fingerprint, suite_of
from grader.engine.records.model import Performance, ProblemResult, Result
from grader.engine.spec.model import Assignment, Problem

Action = Literal["keep", "rescore", "regrade"]


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str = ""


def decide(result: Result, assignment: Assignment) -> Decision:
    """What a stored result needs under `assignment`: nothing, a re-score, or a new grading."""
    if result.status != "graded":
        return Decision("keep")  # a bad archive stays bad whatever the spec says
    names = [p.name for p in result.problems]
    missing = [n for n in names if n not in {p.name for p in assignment.problems}]
    if missing:
        return Decision("regrade", f"the spec no longer has problem(s) {', '.join(missing)}")
    now = fingerprint(assignment, names, suite_of(result.environment.interpreter))
    then = result.assignment.spec
    if then is None:  # an older grader's result: nothing to compare (a new version number regrades it)
        return Decision("keep", "graded before spec fingerprints were recorded")
    if then.grading != now.grading:
        return Decision("regrade", "cases, tolerances or rules changed")
    if then.scoring != now.scoring:
        return Decision("rescore", "only points, case weights or thresholds changed")
    return Decision("keep")


def _performance(problem: Problem, perf: Performance) -> Performance:
    if perf.status in ("measured", "flagged") and perf.shapes:
        from grader.engine.judge import performance  # imports torch and the timing code: only when there are times

        return performance.score(problem, perf.shapes, perf.gpu or "")
    score = None if perf.score is None else 0.0
    return perf.model_copy(update={"max_score": problem.points.performance, "score": score})


def rescore_problem(stored: ProblemResult, problem: Problem, suite: str) -> ProblemResult:
    """One problem's verdicts, scored with `problem`'s points, weights and thresholds."""
    result = stored.model_copy(deep=True)
    cases = {f"{problem.name}: {c.name}": c for c in problem.suite_cases(suite)}
    tests = [t for t in result.tests if t.name in cases]
    scoring.assign_case_points(problem, [cases[t.name] for t in tests], tests, cheat=result.kernel_check)
    if result.performance is not None:
        result.performance = _performance(problem, result.performance)
    result.max_score = problem.max_score
    return scoring.finish_problem(result, fatal=stored.status == "error")


def rescore_result(stored: Result, assignment: Assignment) -> Result:
    """The whole result under `assignment`'s scoring, with a note that says it was re-scored."""
    suite = suite_of(stored.environment.interpreter)
    problems = [rescore_problem(p, assignment.problem(p.name), suite) for p in stored.problems]
    names = [p.name for p in problems]
    result = stored.model_copy(deep=True)
    result.problems = problems
    scoring.total(result)
    result.assignment.spec = fingerprint(assignment, names, suite)
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    note = (
        f"re-scored on {when} from the stored case results after the spec's points or thresholds changed (no "
        f"kernel ran)"
    )
    result.warnings = [w for w in result.warnings if not w.startswith("re-scored on ")] + [note]
    return result


def with_gpu_performance(cpu: Result, gpu: Result) -> Result:
    """This run's correctness with the GPU record's performance, problem by problem, totalled again
    (a Gradescope run of the files a GPU batch graded: grader/engine/records/gradescope_gpu.py)."""
    performance = {p.name: p.performance for p in gpu.problems}
    merged = cpu.model_copy(deep=True)
    for problem in merged.problems:
        measured = performance.get(problem.name)
        if measured is not None and measured.status != "not_measured":
            problem.performance = measured.model_copy(deep=True)
            scoring.finish_problem(problem, fatal=problem.status == "error")
    merged.warnings = [*merged.warnings, *(w for w in gpu.warnings if w not in merged.warnings)]
    return scoring.total(merged)


# -- the command ---------------------------------------------------------------------------------


# -- resuming a batch ----------------------------------------------------------------------------
