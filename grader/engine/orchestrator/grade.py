"""The trusted side of grading: the whole pipeline, one submission at a time.

load spec -> check the submission -> correctness per problem (in workers) -> performance ->
score -> the Result record. This module never imports the submission: it makes inputs and
expected outputs, sends inputs to a worker, and judges the data that comes back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from grader.engine.judge import reference_archive, reference_cache, scan, scoring
from grader.engine.judge.fingerprint import fingerprint, suite_of
from grader.engine.orchestrator import first_calls, problem_result, timed_shapes, trace
from grader.engine.orchestrator.options import DEFAULT_SECRET, GradeOptions, environment, resolve_device
from grader.engine.orchestrator.problem_run import ProblemRun
from grader.engine.orchestrator.progress import ProblemEvent, cases_done
from grader.engine.records.files import submission_files, submission_hash
from grader.engine.records.model import (
    AssignmentRef,
    Performance,
    ProblemResult,
    Result,
    SubmissionRef,
    TestResult,
)
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.scope import GradingScope
from grader.engine.spec import versions
from grader.engine.spec.model import Assignment


def _check_all(runs: list[ProblemRun], parallel: int) -> list[list[TestResult]]:
    """Every problem's correctness half; `parallel` at once, each problem in its own worker.

    On a GPU the correctness half is mostly compiling (Triton, autotuning) on the CPU, and the
    problems' workers are independent, so they overlap; timing (finish) stays one at a time.
    A failure on the grader's own side is retried once, alone (`_again`).
    """
    if parallel <= 1 or len(runs) <= 1:
        checked = [_checked(run) for run in runs]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="grader-check") as pool:
            checked = list(pool.map(_checked, runs))
    return [tests if isinstance(tests, list) else _again(runs, i, tests) for i, tests in enumerate(checked)]


def _checked(run: ProblemRun) -> list[TestResult] | BaseException:
    """The problem's correctness half, or what failed on the grader's side (the submission's own
    failures are verdicts inside: nothing it does raises here)."""
    try:
        events, started = run.options.events, time.monotonic()
        if events:
            events(ProblemEvent(problem=run.problem.name, stage="started", cases=len(run.cases)))
        with trace.span(run.problem.name, "correctness"):
            tests = run.check()
        if events:
            seconds = time.monotonic() - started
            done = cases_done(tests)
            events(
                ProblemEvent(
                    problem=run.problem.name, stage="checked", cases=len(run.cases), cases_done=done, seconds=seconds
                )
            )
        with trace.span(run.problem.name, "first calls at the benchmark shapes"):
            first_calls.warm(run, tests)
    except Exception as exc:  # noqa: BLE001 - the grader's own failure: retried, then ungradable
        return exc
    return tests


def _again(runs: list[ProblemRun], i: int, failed: BaseException) -> list[TestResult]:
    """The problem's correctness half once more, in a fresh run, alone (a CUDA out-of-memory
    error beside others, a worker that could not start); a second failure makes it ungradable."""
    old = runs[i]
    old.close()
    runs[i] = run = old.fresh()
    tests = _checked(run)
    if isinstance(tests, list):
        run.output.append(f"--- grader ---\ngraded again after the grader's own failure: {_said(failed)}")
        return tests
    run.ungradable = f"the grader failed twice on this problem: {_said(failed)}; then {_said(tests)}"
    return []


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def _warm_reference(version: str) -> list[str]:
    """The reference cache filled from $GRADER_REFERENCE_ARCHIVE (`--reference-cache FILE`), if set;
    an archive that cannot serve here is a warning, and the reference compiles as without one."""
    given = os.environ.get(reference_archive.ENV)
    if not given:
        return []
    try:
        with trace.span("reference cache", "unpacked from its archive"):
            reference_archive.unpack(Path(given), version)
    except reference_archive.ArchiveError as exc:
        return [str(exc)]
    return []


@contextmanager
def _timing_lease(runs: list[ProblemRun], checked: list[list[TestResult]]) -> Iterator[None]:
    """The GPU alone for this submission's timing, once for all its problems (one wait, not one per
    problem): other gradings' correctness calls wait, and they run again as soon as it is done."""
    timed = [run for run, tests in zip(runs, checked) if run.will_time(tests)]
    lease = timed[0].lease if timed else None
    if lease is None:
        yield
        return
    for run in runs:
        run.pause()  # stopped before the wait: nothing of ours runs while others are timed either
    asked = time.monotonic()
    with lease.exclusive():
        timed[0].phases.gpu_wait_s += time.monotonic() - asked
        yield


def grade(assignment: Assignment, submission: Path, options: GradeOptions) -> Result:
    """Grade one submission folder; never raises for anything the submission does.

    Every process the grading's workers start ends with it (grader/engine/sandbox/scope.py), whether it
    returns, raises, or is killed.
    """
    scope = GradingScope()
    runs: list[ProblemRun] = []
    try:
        result = _grade(assignment, submission, options, scope, runs)
    finally:
        for run in runs:
            run.close()
        left = scope.close()
    if left:  # checked before the next grading starts: nothing of this one may run beside it
        raise RuntimeError(f"{len(left)} processes of this grading could not be ended: {left[:10]}")
    if scope.statement:
        result.warnings.append(scope.statement)
    return result


def _grade(
    assignment: Assignment, submission: Path, options: GradeOptions, scope: GradingScope, runs: list[ProblemRun]
) -> Result:
    started = time.monotonic()
    submission = submission.resolve()
    device = resolve_device(options.device)
    warnings: list[str] = []
    config = SandboxConfig(
        device=device,
        hide=options.hide,
        worker_user=options.worker_user,
        extra_env=versions.worker_env(assignment.environment),
        scope=scope,
    )
    if options.secret == DEFAULT_SECRET and assignment.has_hidden_cases:
        warnings.append("graded with the default secret: inputs are predictable; set GRADER_SECRET for real grading")
    sha = submission_hash(submission)
    runs += [
        ProblemRun(p, submission, device, options, config, sha)
        for p in assignment.problems
        if not options.problems or p.name in options.problems
    ]
    for run in runs:  # every worker's imports at once, beside the grader's own start (2-4 s each)
        if run.cases:
            run.spawn()
    if device == "cuda" and options.time_performance:
        warnings += _warm_reference(assignment.assignment.version)
        reference_cache.activate(assignment.assignment.version)  # compiled and tuned once per machine
    findings = scan.scan_submission(submission)
    problems = []
    isolation = ""
    modules = {p.module for p in assignment.problems}
    with trace.span("all problems", "correctness"):
        checked = _check_all(runs, options.parallel or (len(runs) if device == "cuda" else 1))
    with _timing_lease(runs, checked):
        for run, tests in zip(runs, checked):
            for other in runs:  # nothing else of this submission runs while one problem is timed
                if other is not run:
                    other.pause()
            if _twice(run, "timing", partial(timed_shapes.measure, run, tests)) is _FAILED:
                _untimed(run)
    for run, tests in zip(runs, checked):  # the rest needs the GPU no more than a correctness call does
        done = cases_done(tests)
        result = _twice(run, "checking the timed rounds", partial(problem_result.finish, run, tests))
        if not isinstance(result, ProblemResult):
            _untimed(run)
            result = problem_result.finish(run, tests)
        result.findings = _findings_of(run, findings, modules)
        isolation = run.isolation or isolation
        problems.append(result)
        _finished(options, run, result, done)
    graded = [p.name for p in problems]
    ungradable = [f"{p.name}: {p.ungradable}" for p in problems if p.ungradable]
    result = Result(
        assignment=AssignmentRef(
            name=assignment.assignment.name,
            version=assignment.assignment.version,
            spec=fingerprint(assignment, graded, suite_of(device == "cpu")),
        ),
        submission=SubmissionRef(
            path=str(submission),
            sha256=sha,
            files=[str(p.relative_to(submission)) for p in submission_files(submission)][:200],
        ),
        environment=environment(device, isolation),
        score=0.0,
        max_score=0.0,
        duration_s=round(time.monotonic() - started, 3),
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        warnings=warnings,
        problems=problems,
    )
    if ungradable:  # an error row a batch grades again; what was graded is kept beside it
        result.status, result.error_kind, result.error = "error", "infrastructure", "; ".join(ungradable)
    return scoring.total(result)


def _findings_of(run: ProblemRun, findings: list[Any], modules: set[str]) -> list[Any]:
    """The scan's findings for one problem: its module's, and any helper file's (which could serve it)."""
    return [
        f
        for f in findings
        if f.file.removesuffix(".py") == run.problem.module or f.file.removesuffix(".py") not in modules
    ]


def _finished(options: GradeOptions, run: ProblemRun, result: ProblemResult, done: int) -> None:
    """Tell whoever follows the grading (`grader grade`'s progress lines) that a problem ended."""
    if options.events:
        options.events(
            ProblemEvent(
                problem=result.name,
                stage="finished",
                cases=len(run.cases),
                cases_done=done,
                seconds=result.duration_s,
                status=result.status,
            )
        )


def _untimed(run: ProblemRun) -> None:
    """The problem's performance pending, with the reason its timing could not be made."""
    points = run.problem.points.performance
    run.timed = Performance(status="not_measured", reason=run.ungradable or "", max_score=points)
    run.checks = []


def _twice(run: ProblemRun, what: str, step: Callable[[], object]) -> object:
    """What `step` (the problem's timing, or its finish) returned, made again once if it fails on
    the grader's side; `_FAILED`, with the problem ungradable, if it fails twice."""
    for attempt in (1, 2):
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - the grader's own failure: never a lost result
            run.stop_worker()
            if attempt == 2:
                run.ungradable = f"the grader failed twice while {what}: {_said(exc)}"
    return _FAILED


_FAILED = object()
