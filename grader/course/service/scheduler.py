"""The queue's workers: N threads, each taking the next fair job (store.claim_next) and grading it.

On a GPU several gradings run at once and their timing stays exclusive through the GPU's lease
(docs/gpu-scheduling.md): the service only starts `grader grade` children, as `grader batch
--jobs N` does. At start-up, what a killed server was grading goes back to the queue, and the
`grader grade` child it had started (recorded by pid in the job's row) is ended first, with the
workers its scope file lists, so a job never runs twice at once. A grading that ran out of GPU
memory, or of its time limit once its correctness had passed, while others shared the GPU is
graded again alone, as `grader batch` does (docs/gpu-scheduling.md): no worker takes a new job
until it is done.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import Engine

from grader.course.batch.results import alone_note, contention
from grader.course.containers.docker import Cancelled
from grader.course.service import store
from grader.course.service.jobs import GradingSetup, Outcome, grade_job
from grader.engine.orchestrator import launch

IDLE_WAIT_S = 2.0
#: what the staff running `grader serve` reads of the queue, beside uvicorn's request lines
LOG = logging.getLogger("grader.serve")

Grade = Callable[..., Outcome]


class Scheduler:
    def __init__(self, engine: Engine, setup: GradingSetup, grade: Grade = grade_job) -> None:
        self.engine, self.setup, self.grade = engine, setup, grade
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._claim = threading.Lock()
        self._runners: dict[int, object] = {}
        self._threads: list[threading.Thread] = []
        # gradings in flight, and whether one is being graded alone (no new job starts meanwhile)
        self._gate = threading.Condition()
        self._running = 0
        self._alone = False

    def start(self) -> list[int]:
        """Requeue what a killed server left running, then start the workers; returns the requeued ids."""
        requeued = []
        for job_id, pid in store.requeue_running(self.engine):
            end_orphan(pid, self.setup.files)
            for left in (self.setup.files / "jobs" / str(job_id)).glob("attempt-*/.work/*/scope"):
                launch.sweep(left)
            requeued.append(job_id)
        for n in range(max(1, self.setup.jobs)):
            thread = threading.Thread(target=self._loop, name=f"grade-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return requeued

    def stop(self) -> None:
        """Stop taking jobs and end the gradings in flight; their jobs stay queued for the next start."""
        self.stopping.set()
        self.wake.set()
        for runner in list(self._runners.values()):
            runner.stop()  # type: ignore[attr-defined]
        for thread in self._threads:
            thread.join(timeout=30)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            with self._gate:
                while self._alone and not self.stopping.is_set():
                    self._gate.wait(IDLE_WAIT_S)
                self._running += 1  # before the claim: a grading alone waits for this one too
            try:
                with self._claim:
                    job = store.claim_next(self.engine)
                if job is not None:
                    self.run(job)
            finally:
                with self._gate:
                    self._running -= 1
                    self._gate.notify_all()
            if job is None:
                self.wake.wait(IDLE_WAIT_S)
                self.wake.clear()
                continue
            self.wake.set()  # this student may have more queued: let the next worker look

    def run(self, job: store.Job) -> None:
        def started(pid: int) -> None:
            store.set_pid(self.engine, job.id, pid)

        def track(runner: object | None) -> None:
            if runner is None:
                self._runners.pop(job.id, None)
            else:
                self._runners[job.id] = runner

        def grade() -> Outcome:
            return self.grade(
                self.setup,
                job.id,
                job.attempts,
                job.person_id,
                job.mode,
                job.problem_list,
                store.archive_of(self.engine, job.id),
                job.archive_name,
                job.secret,
                started,
                track,
            )

        what = f"{job.mode} of {job.person_id}, {job.problems or 'every problem'}"
        LOG.info("grading job %d (%s, attempt %d)", job.id, what, job.attempts)
        began = time.monotonic()
        try:
            outcome = grade()
            why = contention(outcome.result) if self.setup.device == "cuda" and self.setup.jobs > 1 else []
            if why and self.stopping.is_set():
                self._requeue(job, "crowded on the GPU: graded alone after the restart")
                return
            if why:
                LOG.info("job %d was crowded on the GPU (%s): grading it again alone", job.id, "; ".join(why))
                outcome = self._alone_grading(grade)
                outcome.result.warnings.append(alone_note(why))
        except Cancelled:
            self._requeue(job, "cancelled")
            return
        except Exception as exc:  # noqa: BLE001 - one job's failure never stops the queue
            if self.stopping.is_set():
                self._requeue(job, "the server is stopping")
                return
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            LOG.error("job %d: the server could not grade it: %s", job.id, detail)
            store.finish(self.engine, job.id, "error", None, f"the server could not grade this job: {detail}")
            return
        if self.stopping.is_set() and outcome.result.error_kind == "infrastructure":
            self._requeue(job, "killed by the shutdown, not by the submission")
            return
        result = outcome.result
        LOG.info(
            "job %d (%s): %s, %g / %g in %.1f s%s",
            job.id,
            what,
            outcome.state,
            result.score,
            result.max_score,
            time.monotonic() - began,
            f": {result.error}" if result.error else "",
        )
        store.finish(self.engine, job.id, outcome.state, result.model_dump_json(), result.error)

    def _requeue(self, job: store.Job, why: str) -> None:
        LOG.info("job %d back in the queue (%s)", job.id, why)
        store.requeue(self.engine, job.id)

    def _alone_grading(self, grade: Callable[[], Outcome]) -> Outcome:
        """`grade` once every other grading in flight has ended, none starting until it is done."""
        with self._gate:
            self._running -= 1  # not in flight while it waits: two crowded-out gradings take turns
            self._gate.notify_all()
            while self._alone:
                self._gate.wait()
            self._alone = True
            while self._running > 0 and not self.stopping.is_set():
                self._gate.wait(IDLE_WAIT_S)
        try:
            return grade()
        finally:
            with self._gate:
                self._alone = False
                self._running += 1  # the loop counts this worker out once run() returns
                self._gate.notify_all()


def end_orphan(pid: int | None, files: Path) -> bool:
    """Kill the process group of a `grader grade` child a killed server left, if it is still ours."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\x00")
    except OSError:
        return False
    ours = b"grader.cli" in cmdline and b"grade" in cmdline and any(str(files).encode() in a for a in cmdline)
    if not ours:
        return False  # the pid was reused by something else: leave it alone
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True
