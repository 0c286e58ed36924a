"""A graded problem's record, from what its run gathered: case points, the kernel check, the status.

`finish` is the problem's last step, once the GPU is no longer held alone (grade.py): its kept
kernels copied, its sampled timed rounds checked, its shapes scored, and the record built.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from grader.engine.judge import performance, scoring
from grader.engine.orchestrator import timed_shapes, trace
from grader.engine.records.model import Performance, Phases, ProblemResult, TestResult

if TYPE_CHECKING:
    from grader.engine.orchestrator.problem_run import ProblemRun


def finish(run: ProblemRun, tests: list[TestResult]) -> ProblemResult:
    """The problem's result, once the GPU is no longer held alone: the sampled timed rounds
    checked beside other gradings' calls, then scored."""
    if run.measured_at:  # the other problems' timing since: not this problem's time
        run.waited += time.monotonic() - run.measured_at
    _keep_kernels(run)
    perf = run.timed
    if isinstance(perf, list):
        started = time.monotonic()
        timed_shapes.check_timed_rounds(run)
        run.phases.checks_s = time.monotonic() - started
        perf = performance.score(run.problem, perf, run.gpu_name)
    result = build(run, tests, perf, time.monotonic() - run.started - run.waited)
    result.profile = run.profiled
    return result


def _keep_kernels(run: ProblemRun) -> None:
    """The stopped worker's Triton cache kept for the student's next grading (`--kernel-cache`):
    a copy of files, made once the GPU is no longer held alone."""
    held, run.held_kernels = run.held_kernels, None
    if held is None or run.kernel_slot is None:
        return
    saving = time.monotonic()
    kept = held.copy(run.kernel_slot)  # then lets go of the worker's namespace, folder and uid
    if kept is not None:
        what = f"kernel cache saved: {kept.files} files, {kept.bytes / 2**20:.1f} MiB"
        cut = ", truncated at the cap" if kept.truncated else ""
        trace.note(time.monotonic() - saving, run.problem.name, what + cut)
        if kept.stopped:
            run.output.append(f"--- grader ---\nthe kernel cache kept for the next grading: {kept.stopped}")


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
        output="\n".join(run.output),  # bounded by the record (grader/engine/records/text.py)
        duration_s=round(duration, 3),
        kernel_check=run.cheat,
        phases=Phases(**{k: round(v, 3) for k, v in run.phases.model_dump().items()}),
        contended=run.contended,
        ungradable=run.ungradable,
        device_review=run.device_note,
    )
    if not cases:
        result.message = f"no {'GPU' if run.device == 'cuda' else 'CPU'} cases: not yet part of the assignment"
    return scoring.finish_problem(result, fatal=run.fatal is not None)
