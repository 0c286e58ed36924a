"""The two local places to run one student's grading, both ending in the same checked `Result`.

Each runs the same command line (`grader.engine.orchestrator.launch.GradeCommand`) and reads the result.json it writes:

- a child process (the default; `--jobs N`, `--gpus`): `grader grade` per student, N at once,
  one GPU each through CUDA_VISIBLE_DEVICES;
- a container (`--docker`): one container per student through grader.course.containers.docker.

A cluster backend (grader.course.cluster) offers the same interface, and its nodes run these very runners.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from grader import ROOT
from grader.course.batch.context import Context
from grader.course.batch.results import BadResult, collect_result
from grader.course.batch.tasks import Task
from grader.course.containers.docker import Cancelled
from grader.engine.orchestrator import launch
from grader.engine.records.model import Result


class Runner(Protocol):
    slots: list[str | None]
    parallel: bool

    def run(self, task: Task, slot: str | None) -> Result: ...

    def stop(self) -> None: ...


def tail_lines(text: str, n: int = 12) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


class SubprocessRunner:
    """`grader grade` in a child process per student: N at once, one GPU each when given."""

    parallel = True

    def __init__(self, ctx: Context, slots: list[str | None]) -> None:
        self.ctx = ctx
        self.slots = slots
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        #: told each child's pid (its process group) as it starts: `grader serve` keeps it, so a
        #: restarted server can end what a killed one left running
        self.on_start: Callable[[int], None] | None = None

    def run(self, task: Task, slot: str | None) -> Result:
        assert task.folder is not None
        started = time.monotonic()
        out = task.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        log = task.work / "grader.log"
        command = self.ctx.command.model_copy(update={"spec": self.ctx.spec.resolve()})
        argv = command.argv(task.folder.resolve(), out.resolve())
        env = command.env()
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot
        env[launch.SCOPE_ENV] = str(task.work / "scope")  # its workers, swept here however the child ends
        launch.sweep(task.work / "scope")  # an earlier attempt's, before this one starts
        with open(log, "wb") as handle:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=str(ROOT),
                start_new_session=True,
            )
        with self._lock:
            self._live.add(proc)
        try:
            if self.on_start is not None:
                self.on_start(proc.pid)
            try:
                code = proc.wait(timeout=self.ctx.wall_s)
            except subprocess.TimeoutExpired:
                _killpg(proc)
                return self.ctx.error(
                    task,
                    f"grading ran past its wall-clock limit of {self.ctx.wall_s:g} s and was stopped",
                    "process",
                    time.monotonic() - started,
                    gpu=slot,
                )
        finally:
            with self._lock:
                self._live.discard(proc)
            left = launch.sweep(task.work / "scope")
        if left:
            return self.ctx.infra_error(
                task, f"{len(left)} processes of this grading could not be ended", "process", gpu=slot
            )
        if self.stopping.is_set():
            raise Cancelled()
        text = log.read_text(errors="replace") if log.exists() else ""
        if code != 0:
            return self.ctx.infra_error(
                task,
                f"`grader grade` exited with code {code}:\n{tail_lines(text)}",
                "process",
                time.monotonic() - started,
                gpu=slot,
            )
        try:
            return collect_result(out, task, self.ctx.assignment)
        except BadResult as exc:
            return self.ctx.infra_error(
                task,
                f"`grader grade` left no usable result: {exc}",
                "process",
                time.monotonic() - started,
                gpu=slot,
            )

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            _killpg(proc)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class DockerRunner:
    """One container per student (grader.course.containers.docker), one GPU per container when given."""

    parallel = True
    entrypoint: list[str] | None = None  # None: the image's grader; tests swap in fakes (crash, garbage)

    def __init__(
        self, ctx: Context, slots: list[str | None], client: Any, image: str, limits: Any, batch_label: str
    ) -> None:
        from grader.course.containers.runner import ContainerRunner

        self.ctx = ctx
        self.slots = slots
        self.image = image
        self.batch_label = batch_label
        self.runner = ContainerRunner(client, limits)

    def run(self, task: Task, slot: str | None) -> Result:
        from grader.course.containers.docker import WORKER_USER
        from grader.course.containers.runner import ContainerJob

        assert task.folder is not None
        started = time.monotonic()
        out = task.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True, mode=0o700)
        os.chmod(out, 0o700)  # the worker (another uid inside) can neither read nor write it
        # in the image: its own spec and kernel cache; the worker user it has
        inside = {"spec": None, "kernel_cache": None, "worker_user": WORKER_USER}
        args = self.ctx.command.model_copy(update=inside).args("/submission", "/out")
        job = ContainerJob(
            student=task.student,
            submission=task.folder,
            out=out,
            image=self.image,
            args=args,
            gpu=slot,
            env={launch.SECRET_ENV: self.ctx.command.secret},
            batch_label=self.batch_label,
            entrypoint=self.entrypoint,
        )
        try:
            outcome = self.runner.run(job)
        except Cancelled:
            raise
        except Exception as exc:  # docker.errors.*, requests: the engine, not the student
            if self.runner.stopping.is_set():
                raise Cancelled() from None
            return self.ctx.infra_error(
                task, f"docker: {type(exc).__name__}: {exc}", "docker", time.monotonic() - started, gpu=slot
            )
        elapsed = time.monotonic() - started
        logs = tail_lines(outcome.logs)
        if outcome.timed_out:
            return self.ctx.error(
                task,
                f"the container ran past its wall-clock limit of {self.ctx.wall_s:g} s and was killed",
                "docker",
                elapsed,
                gpu=slot,
            )
        if outcome.oom_killed:
            return self.ctx.error(
                task,
                f"the container ran out of memory (limit {self.runner.limits.memory}) and was killed",
                "docker",
                elapsed,
                gpu=slot,
            )
        if outcome.exit_code != 0:
            return self.ctx.error(
                task,
                f"the grading container exited with code {outcome.exit_code}:\n{logs}",
                "docker",
                elapsed,
                gpu=slot,
            )
        try:
            return collect_result(out, task, self.ctx.assignment)
        except BadResult as exc:
            return self.ctx.error(
                task,
                f"the grading container produced no usable result: {exc}\n{logs}".strip(),
                "docker",
                elapsed,
                gpu=slot,
            )

    def stop(self) -> None:
        self.runner.kill_all()
