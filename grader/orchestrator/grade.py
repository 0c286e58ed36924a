"""The trusted side of grading: the whole pipeline, one submission at a time.

load spec -> check the submission -> correctness per problem (in workers) -> performance ->
score -> the Result record. This module never imports the submission: it makes inputs and
expected outputs, sends inputs to a worker, and judges the data that comes back.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from grader.judge import reference_archive, reference_cache, scan, scoring
from grader.judge.fingerprint import fingerprint, suite_of
from grader.orchestrator import trace
from grader.orchestrator.options import (
    DEFAULT_SECRET,
    GradeOptions,
    environment,
    resolve_device,
    submission_files,
    submission_hash,
)
from grader.orchestrator.problem_run import ProblemRun
from grader.records.model import (
    AssignmentRef,
    Result,
    SubmissionRef,
    TestResult,
)
from grader.sandbox.config import SandboxConfig
from grader.sandbox.scope import GradingScope
from grader.spec import versions
from grader.spec.model import Assignment


def _check_all(runs: list[ProblemRun], parallel: int) -> list[list[TestResult]]:
    """Every problem's correctness half; `parallel` at once, each problem in its own worker.

    On a GPU the correctness half is mostly compiling (Triton, autotuning) on the CPU, and the
    problems' workers are independent, so they overlap; timing (finish) stays one at a time.
    """
    if parallel <= 1 or len(runs) <= 1:
        return [_checked(run) for run in runs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="grader-check") as pool:
        return list(pool.map(_checked, runs))


def _checked(run: ProblemRun) -> list[TestResult]:
    with trace.span(run.problem.name, "correctness"):
        tests = run.check()
    with trace.span(run.problem.name, "first calls at the benchmark shapes"):
        run.warm(tests)
    return tests


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

    Every process the grading's workers start ends with it (grader/sandbox/scope.py), whether it
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
            run.measure(tests)
    for run, tests in zip(runs, checked):  # the rest needs the GPU no more than a correctness call does
        result = run.finish(tests)
        # a finding in a helper file (not one of the four modules) could serve any problem
        result.findings = [
            f
            for f in findings
            if f.file.removesuffix(".py") == run.problem.module or f.file.removesuffix(".py") not in modules
        ]
        isolation = run.isolation or isolation
        problems.append(result)
    graded = [p.name for p in problems]
    result = Result(
        assignment=AssignmentRef(
            name=assignment.assignment.name,
            version=assignment.assignment.version,
            spec=fingerprint(assignment, graded, suite_of(device == "cpu")),
        ),
        submission=SubmissionRef(
            path=str(submission),
            sha256=sha,
            student=options.student,
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
    return scoring.total(result)
