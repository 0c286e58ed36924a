"""One job graded: its archive unpacked as `grader batch` unpacks one, then the batch's own runner.

Each attempt gets a fresh folder under the service's files folder (`jobs/<id>/attempt-<n>/`),
so what a killed attempt left behind is never mistaken for this one's. The grading is a batch
of one: a `grader grade` child (the local backend) or the cluster backend's task, with the
secret in its environment and, hidden from its workers, the database, every stored file of the
service and the other jobs' folders.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from grader.course.batch import archives
from grader.course.batch.context import Context, selected_problems
from grader.course.batch.discovery import Entry
from grader.course.batch.options import PER_PROBLEM_ALLOWANCE_S, STARTUP_ALLOWANCE_S, BatchOptions
from grader.course.batch.tasks import Task, prepare
from grader.course.containers.docker import Cancelled
from grader.engine.assignment.load import load_assignment
from grader.engine.orchestrator.launch import GradeCommand
from grader.engine.records.model import Result
from grader.engine.spec.model import Assignment

#: the grade options of each mode beyond the common ones: (public cases only, time the kernels,
#: profile one warm call per benchmark shape)
MODE_RUN = {
    "test": (True, True, False),
    "benchmark": (True, True, False),
    "profile": (True, False, True),
    "final": (False, True, False),
}


@dataclass
class GradingSetup:
    """How this server grades: what `grader serve`'s options say, fixed for its lifetime."""

    spec: Path
    device: str  # "cpu" or "cuda"
    secret: str
    files: Path  # the service's own folder: scratch, the secret file
    hide: list[Path]  # the database (and its journal files), the files folder
    backend: str = "local"
    jobs: int = 1  # gradings at once
    timeout: float | None = None
    worker_user: str = "nobody"
    kernel_cache: Path | None = None
    cluster: dict[str, object] = field(default_factory=dict)  # BatchOptions fields for ray/slurm


@dataclass
class Outcome:
    state: str  # "graded" or "error"
    result: Result


def assignment_for(setup: GradingSetup, mode: str) -> Assignment:
    """The spec a mode grades against: only `final` reads the hidden cases."""
    return load_assignment(setup.spec, hidden=None if mode == "final" else False)


def context(setup: GradingSetup, mode: str, problems: list[str] | None, secret: str | None) -> Context:
    assignment = assignment_for(setup, mode)
    public_only, timed, profiled = MODE_RUN[mode]
    chosen = selected_problems(assignment, problems)
    command = GradeCommand(
        spec=setup.spec,
        device=setup.device,  # type: ignore[arg-type]
        timeout=setup.timeout,
        problems=tuple(problems) if problems else None,
        public_only=public_only,
        timing=timed,
        profile=profiled,
        kernel_cache=setup.kernel_cache,
        worker_user=setup.worker_user,
        secret=secret or setup.secret,
        hide=tuple(setup.hide),
    )
    wall = STARTUP_ALLOWANCE_S + sum((setup.timeout or p.time_limit_s) + PER_PROBLEM_ALLOWANCE_S for p in chosen)
    if setup.device == "cuda":
        wall *= setup.jobs  # a grading may wait for the others' timing on the GPU
    return Context(assignment, chosen, command, wall)


def runner_for(setup: GradingSetup, ctx: Context, task: Task, on_start: Callable[[int], None]):  # type: ignore[no-untyped-def]
    """The batch's runner for one task: a `grader grade` child here, or the cluster backend's."""
    if setup.backend == "local":
        from grader.course.batch.runners import SubprocessRunner

        runner = SubprocessRunner(ctx, [None])
        runner.on_start = on_start
        return runner
    from grader.course.cluster import make_runner

    options = BatchOptions(
        submissions=task.work,
        out=task.out,
        grading=ctx.command,
        backend=setup.backend,
        **setup.cluster,  # type: ignore[arg-type]
    )
    runner, _ = make_runner(ctx, options, Console(stderr=True, quiet=True))
    if hasattr(runner, "start"):
        runner.start([task])  # a Slurm job array of one
    return runner


def grade_job(
    setup: GradingSetup,
    job_id: int,
    attempt: int,
    student: str,
    mode: str,
    problems: list[str] | None,
    archive: bytes,
    archive_name: str,
    secret: str | None,
    on_start: Callable[[int], None],
    on_runner: Callable[[object | None], None] = lambda runner: None,
) -> Outcome:
    """Grade one stored archive; whatever happens is an Outcome (an error record at worst)."""
    folder = setup.files / "jobs" / str(job_id) / f"attempt-{attempt}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)
    upload = folder / f"upload{archives.archive_suffix(Path(archive_name)) or '.tar.gz'}"
    upload.write_bytes(archive)
    ctx = context(setup, mode, problems, secret)
    task = prepare(Entry(student, upload, "archive"), folder, [p.module for p in ctx.assignment.problems])
    if task.error:
        return Outcome("error", named(ctx.error(task, task.error, "none"), archive_name))
    runner = runner_for(setup, ctx, task, on_start)
    on_runner(runner)  # the scheduler stops it when the server stops
    try:
        result = runner.run(task, None)
    except Cancelled:
        raise  # the server is stopping: the job goes back to the queue
    except Exception as exc:  # noqa: BLE001 - the backend's failure is this job's error record, not the server's
        result = ctx.infra_error(task, f"the grading backend failed: {type(exc).__name__}: {exc}", "none")
    finally:
        on_runner(None)
        runner.stop()
    return Outcome("graded" if result.status == "graded" else "error", named(result, archive_name))


def named(result: Result, archive_name: str) -> Result:
    """The record names the upload as the student named it, never the server's paths."""
    result.submission.path = archive_name
    return result
