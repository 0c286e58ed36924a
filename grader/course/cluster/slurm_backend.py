"""`grader batch --backend slurm`: the class as one Slurm job array, through submitit.

Slurm clusters share a filesystem between the login node and the compute nodes, so nothing
travels but paths: element i grades student i's folder (the submissions folder, or the archive
unpacked under OUT/.work/) as `grader grade` does, in the element's own process with the grader's
sandbox for the student's code (Docker is rarely allowed there), and commits result.json,
report.html and gradescope/ into OUT/<student>/ itself, so a driver that dies (a closed ssh
session on the login node) loses nothing: the next run finds the results by content hash. The
driver waits for each element and commits what it returns, as it does a local run's.

Failures: elements ask Slurm to requeue them when their node fails (--requeue), and submitit
requeues one that Slurm stops at its time limit or preempts (the element is checkpointable: it
simply starts again). An element that still ends without a result becomes an infrastructure
error row, graded again by the next run. The student's code never fails an element: whatever it
does ends in a result.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from grader.course.batch.context import Context
from grader.course.batch.errors import BatchError
from grader.course.batch.options import BatchOptions
from grader.course.batch.results import commit_result
from grader.course.batch.runners import tail_lines
from grader.course.batch.tasks import Task
from grader.course.cluster import node
from grader.course.containers.docker import Cancelled
from grader.engine.records.model import Result

FOLDER = ".slurm"  # OUT/.slurm: submitit's pickles and logs (0700: the recipe holds the secret)
STATE = "array.json"  # the running array's job id, so a restarted batch cancels the old one
RETRIES = 3  # requeues after a time-out or preemption (Slurm's own requeue after a node failure is apart)
POLL_S = 2.0
MARGIN_MIN = 5  # minutes on top of the spec's limits: Python and CUDA start-up on a cold node
IN_FLIGHT = 256
TEARDOWN_S = 3.0  # how long an element whose grading died waits for Slurm's SIGTERM before calling it an error


def sbatch_options(pairs: list[str]) -> dict[str, Any]:
    """--slurm-option KEY=VALUE (or a bare KEY for a flag) as submitit's additional_parameters."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip().lstrip("-")
        if not key:
            raise BatchError(f"--slurm-option {pair!r}: expected KEY=VALUE, e.g. account=cs336")
        options[key] = value.strip() if sep else True
    return options


def time_limit_min(ctx: Context, given: int | None) -> int:
    """Minutes per element: the batch's wall limit per student (the spec's time_limit_s summed) plus a margin."""
    return given if given else math.ceil(ctx.wall_s / 60) + MARGIN_MIN


# -- on the node ---------------------------------------------------------------------------------


class Element:
    """One array element; submitit calls it on the node and pickles back the Result it returns."""

    def __call__(
        self,
        recipe: node.Recipe,
        student: str,
        source: str,
        sha: str,
        folder: str,
        work: str,
        committed: str,
        hide: list[str],
    ) -> Result:
        here = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or None) if recipe.command.device == "cuda" else None
        # Slurm ends a job (requeue after a node failure, scancel, its time limit) by sending
        # SIGTERM to every process of it at once: the grading dies with it, and what it leaves is
        # no result. Exit without one, so Slurm's requeue (or the driver) decides what follows.
        ending = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: ending.set())
        # this process exists for this one student and has imported torch already: grade here
        result = node.grade_folder(recipe, student, source, sha, Path(folder), Path(work), gpu, [Path(h) for h in hide])
        if result.error_kind == "infrastructure":
            ending.wait(TEARDOWN_S)  # the signal may land a moment after the grading's death
        if ending.is_set():
            os._exit(143)
        result = node.where(result, here, gpu)
        if result.error_kind != "infrastructure":
            commit_result(result, Path(committed))  # the driver may be gone by now: the next run finds it
        return result

    def checkpoint(self, *args: Any, **kwargs: Any) -> Any:
        """Requeued after a time-out or preemption: the grading starts over (it keeps no state)."""
        import submitit

        return submitit.helpers.DelayedSubmission(self, *args, **kwargs)


# -- on the driver -------------------------------------------------------------------------------


class SlurmRunner:
    """grader.course.batch's runner interface over one job array; start() submits it, run() waits for one element."""

    parallel = True

    def __init__(
        self, ctx: Context, recipe: node.Recipe, executor: Any, folder: Path, hide: list[Path], name: str
    ) -> None:
        self.ctx, self.recipe, self.executor, self.folder, self.hide, self.name = (
            ctx,
            recipe,
            executor,
            folder,
            hide,
            name,
        )
        self.slots: list[str | None] = [None]
        self.jobs: dict[str, Any] = {}
        self.queue = QueueWatch()
        self.stopping = threading.Event()

    def start(self, todo: list[Task]) -> None:
        """Submit every student at once: one sbatch, one array."""
        if not todo:
            return
        self.slots = [None] * min(len(todo), IN_FLIGHT)
        hide = [str(p) for p in self.hide]
        try:
            with self.executor.batch():
                for task in todo:
                    assert task.folder is not None
                    task.work.mkdir(parents=True, exist_ok=True)
                    args = (
                        self.recipe,
                        task.student,
                        str(task.entry.source),
                        task.sha,
                        str(task.folder.resolve()),
                        str(task.work.resolve()),
                        str(task.out.resolve()),
                        hide,
                    )
                    self.jobs[task.student] = self.executor.submit(Element(), *args)
        except (OSError, subprocess.SubprocessError, RuntimeError) as exc:  # sbatch refused: nothing was queued
            raise BatchError(f"sbatch could not queue the job array: {str(exc).strip()[:600]}") from None
        ids = sorted({job.job_id.split("_")[0] for job in self.jobs.values()})
        self.queue.arrays = ids
        (self.folder / STATE).write_text(json.dumps({"jobs": ids, "name": self.name}))

    def run(self, task: Task, slot: str | None) -> Result:
        from submitit.core.utils import FailedJobError, UncompletedJobError

        job = self.jobs[task.student]
        started = time.monotonic()
        while not _has_result(job):
            if self.stopping.wait(POLL_S):
                raise Cancelled()
            if self.queue.gone(job.job_id) and not _has_result(job):
                log = tail_lines(job.stdout() or "")
                reason = f"slurm job {job.job_id} left the queue without a result (log {job.paths.stdout})" + (
                    f":\n{log}" if log else ""
                )
                return self.ctx.infra_error(task, reason, "none", time.monotonic() - started)
        try:
            result: Result = job.result()
        except (UncompletedJobError, FailedJobError) as exc:
            if self.stopping.is_set():
                raise Cancelled() from None
            return self.ctx.infra_error(
                task,
                f"slurm job {job.job_id} failed: {tail_lines(str(exc))}",
                "none",
                time.monotonic() - started,
            )
        result.submission.path = str(task.entry.source)
        result.submission.student = task.student
        return result

    def stop(self) -> None:
        """Ctrl-C: cancel the whole array."""
        self.stopping.set()
        cancel(sorted({job.job_id.split("_")[0] for job in self.jobs.values()}), self.name)


def _has_result(job: Any) -> bool:
    """The element's result file is there; the chmod makes NFS look again (as submitit does)."""
    folder = job.paths.folder
    try:
        folder.chmod(folder.stat().st_mode)
    except OSError:
        pass
    return bool(job.paths.result_pickle.exists())


class QueueWatch:
    """Which array elements Slurm still holds (pending, running, requeued), one squeue for all.

    submitit learns that a job died without a result from sacct, which needs Slurm's accounting
    database (many clusters have one; a small one may not) and is asked only every few minutes;
    squeue is always there. An element is gone once squeue has not listed it for GONE_S.
    """

    GONE_S = 60.0  # longer than NFS caches a folder's attributes (acdirmax), so a result is seen first

    def __init__(self) -> None:
        self.arrays: list[str] = []
        self.present: set[str] = set()
        self.missing_since: dict[str, float] = {}
        self.asked = self.tried = 0.0  # when squeue last answered, when it was last asked
        self.lock = threading.Lock()

    def gone(self, job_id: str) -> bool:
        with self.lock:
            now = time.monotonic()
            if now - self.tried >= POLL_S:
                self.tried = now
                self._ask(now)
            if now - self.asked > 3 * POLL_S:
                self.missing_since.clear()  # squeue has not answered lately: nothing is known gone
                return False
            if job_id in self.present:
                self.missing_since.pop(job_id, None)
                return False
            first = self.missing_since.setdefault(job_id, now)
            return now - first >= self.GONE_S

    def _ask(self, now: float) -> None:
        if not self.arrays:
            return
        try:
            listed = subprocess.run(
                ["squeue", "-h", "-r", "-o", "%i", "-j", ",".join(self.arrays)],
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError):
            return  # no answer is not an answer: nothing counts as gone
        if listed.returncode != 0 and "Invalid job id" not in listed.stderr:
            return
        self.present = set(listed.stdout.split())
        self.asked = now


def cancel(job_ids: list[str], name: str) -> None:
    """scancel these jobs if they still carry this batch's job name (ids restart on a new cluster)."""
    if job_ids and shutil.which("scancel"):
        subprocess.run(
            ["scancel", f"--name={name}", *job_ids],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )


def cancel_stale(folder: Path, name: str) -> list[str]:
    """The array a killed run of this batch left in the queue: cancelled, since this run grades it again."""
    try:
        ids = [str(i) for i in json.loads((folder / STATE).read_text()).get("jobs", [])]
    except (OSError, ValueError, AttributeError):
        return []
    try:
        listed = subprocess.run(
            ["squeue", "-h", "-o", "%i", f"--name={name}", "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        known = listed.returncode == 0 or "Invalid job id" in listed.stderr  # long gone from Slurm's memory
        queued = sorted({i.split("_")[0] for i in listed.stdout.split()}) if known else ids
    except (OSError, subprocess.SubprocessError):
        queued = ids  # cannot tell: cancel them (scancel of a finished job is a no-op)
    cancel(queued, name)
    (folder / STATE).unlink(missing_ok=True)
    return queued


def make_runner(ctx: Context, batch: BatchOptions, console: Console) -> tuple[SlurmRunner, dict[str, Any]]:
    try:
        import submitit
    except ImportError:
        raise BatchError("--backend slurm needs submitit: pip install 'triton-kernels-assignment[cluster]'") from None
    if batch.docker is not None:
        raise BatchError(
            "--backend slurm grades without Docker (rarely allowed on Slurm): each element grades as `grader "
            "grade` does, with the grader's sandbox; drop --docker"
        )
    if shutil.which("sbatch") is None:
        raise BatchError(
            "--backend slurm: no sbatch on this machine's PATH (run the batch on the cluster's login node)"
        )
    out = batch.out
    slurm = batch.slurm
    folder = out / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    # one job name per output folder: scancel by id and name never hits another batch's jobs
    name = f"grade-{hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:12]}"
    stale = cancel_stale(folder, name)
    if stale:
        console.print(f"slurm: cancelled job array {', '.join(stale)} left by an earlier, killed run of this batch")
    gpus = slurm.gpus_per_task if slurm.gpus_per_task is not None else (1 if ctx.device == "cuda" else 0)
    params: dict[str, Any] = {
        "job_name": name,
        "time": time_limit_min(ctx, slurm.time_min),
        "ntasks_per_node": 1,
        "stderr_to_stdout": True,
        "additional_parameters": {"requeue": True, **sbatch_options(slurm.sbatch)},
    }
    if slurm.partition:
        params["partition"] = slurm.partition
    if gpus:
        params["gpus_per_task"] = gpus
    if slurm.cpus_per_task:
        params["cpus_per_task"] = slurm.cpus_per_task
    if slurm.setup:
        params["setup"] = list(slurm.setup)
    executor = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=RETRIES)
    executor.update_parameters(**params)
    # ctx.hide holds the output folder (other students' unpacked archives and results) and the
    # submissions: on the filesystem every node shares, the same paths hide them there too
    runner = SlurmRunner(ctx, node.recipe_for(ctx), executor, folder, ctx.hide, name)
    meta = {
        "mode": "slurm",
        "partition": slurm.partition or "default",
        "gpus_per_task": gpus,
        "time_min": params["time"],
        "gpus": [],
    }
    return runner, meta
