"""The queue's workers on a shared GPU: a grading crowded out by the others is graded again alone.

The gradings are stand-ins (the CPU cannot run out of GPU memory): `crowded` runs out of it when
another grading is in flight, as a real one can beside other students' workers.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from grader.course.service import db, store, tokens
from grader.course.service.jobs import GradingSetup, Outcome
from grader.course.service.scheduler import Scheduler
from tests.grader.course.service.service_support import fake_grade

ROOT = Path(__file__).resolve().parents[4]


class Crowding:
    """fake_grade, counting the gradings in flight; the first of `crowded` and `x` meet."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running: set[str] = set()
        self.beside: dict[str, list[int]] = {}
        self.meet = threading.Barrier(2, timeout=30)

    def __call__(self, setup: GradingSetup, job_id: int, attempt: int, student: str, *rest: Any) -> Outcome:
        with self.lock:
            first = student not in self.beside
            self.beside.setdefault(student, [])
            self.running.add(student)
        try:
            if first and student in ("crowded", "x"):
                self.meet.wait()
            time.sleep(0.2)
            with self.lock:
                others = len(self.running - {student})
            if first and student in ("crowded", "x"):
                self.meet.wait()
            self.beside[student].append(others)
            outcome = fake_grade(setup, job_id, attempt, student, *rest)
            if student == "crowded" and others:
                outcome.result.problems[0].contended = "out_of_memory"
            return outcome
        finally:
            with self.lock:
                self.running.discard(student)


def graded(tmp_path: Path, device: str) -> tuple[Crowding, dict[str, store.Job]]:
    engine = db.open_db(f"sqlite:///{tmp_path / 'queue.db'}")
    ids = {}
    for who in ("crowded", "x", "y"):
        tokens.issue(engine, tokens.Person(who, who, ""))
        ids[who] = store.add_job(engine, who, "test", b"x", f"{who}.tar.gz")
    setup = GradingSetup(
        spec=ROOT / "assignment.toml", device=device, secret="s", files=tmp_path / "f", hide=[], jobs=2
    )
    crowding = Crowding()
    scheduler = Scheduler(engine, setup, grade=crowding)
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while any(store.get(engine, i).state != "graded" for i in ids.values()):  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        scheduler.stop()
    return crowding, {who: store.get(engine, i) for who, i in ids.items()}  # type: ignore[misc]


def test_a_grading_crowded_out_on_a_shared_gpu_is_graded_again_alone(tmp_path: Path) -> None:
    crowding, jobs = graded(tmp_path, "cuda")
    assert crowding.beside["crowded"][0] >= 1 and crowding.beside["crowded"][1:] == [0]
    assert len(crowding.beside["x"]) == len(crowding.beside["y"]) == 1
    result = jobs["crowded"].result
    assert result is not None and '"contended":null' in result.replace(" ", "")
    assert "graded again alone: gelu ran out of GPU memory beside other gradings" in result


def test_on_a_cpu_nothing_is_graded_again(tmp_path: Path) -> None:
    crowding, jobs = graded(tmp_path, "cpu")
    assert len(crowding.beside["crowded"]) == 1
    assert '"contended":"out_of_memory"' in (jobs["crowded"].result or "").replace(" ", "")


def test_a_crowded_grading_that_a_shutdown_ends_is_queued_again_not_kept(tmp_path: Path) -> None:
    # the server stops while a job crowded out beside others is still to be graded alone: its
    # crowded result is not kept; the job waits in the queue for the restarted server
    engine = db.open_db(f"sqlite:///{tmp_path / 'queue.db'}")
    ids = {}
    for who in ("crowded", "x"):
        tokens.issue(engine, tokens.Person(who, who, ""))
        ids[who] = store.add_job(engine, who, "test", b"x", f"{who}.tar.gz")
    setup = GradingSetup(
        spec=ROOT / "assignment.toml", device="cuda", secret="s", files=tmp_path / "f", hide=[], jobs=2
    )
    crowding = Crowding()
    holder: list[Scheduler] = []

    def grade(setup: GradingSetup, job_id: int, attempt: int, student: str, *rest: Any) -> Outcome:
        outcome = crowding(setup, job_id, attempt, student, *rest)
        if student == "crowded":
            holder[0].stopping.set()  # the shutdown arrives while this grading ends
        return outcome

    scheduler = Scheduler(engine, setup, grade=grade)
    holder.append(scheduler)
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while store.get(engine, ids["crowded"]).state == "running" or store.get(engine, ids["x"]).state != "graded":  # type: ignore[union-attr]
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        scheduler.stop()
    crowded = store.get(engine, ids["crowded"])
    assert crowded is not None and crowded.state == "queued" and crowded.result is None
    assert len(crowding.beside["crowded"]) == 1  # not graded alone by the stopping server
