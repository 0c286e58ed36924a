"""The queue in the database: fair between students, whole across restarts, and its schema's version.

The tests that take `database` run on SQLite here and on PostgreSQL in test_postgres.py.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine

from grader.course.service import db, store, tokens
from grader.course.service.jobs import GradingSetup
from grader.course.service.quotas import check
from grader.course.service.scheduler import Scheduler, end_orphan
from grader.engine.spec.model import Quota
from tests.grader.course.service.service_support import fake_grade

#: a server that claims the next job, records itself as its grading child, and is killed while it grades
CLAIMING_SERVER = """
import os, sys, time
from grader.course.service import db, store
engine = db.open_db(sys.argv[1])
job = store.claim_next(engine)
store.set_pid(engine, job.id, os.getpid())
print(job.id, flush=True)
time.sleep(60)
"""


ROOT = Path(__file__).resolve().parents[4]


def _engine(database: str, people: tuple[str, ...] = ("ann", "ben", "cat")):  # type: ignore[no-untyped-def]
    engine = db.open_db(database)
    for who in people:
        tokens.issue(engine, tokens.Person(who, who, ""))
    return engine


def _run_all(engine) -> list[str]:  # type: ignore[no-untyped-def]
    """Students in the order one worker grades their queued jobs."""
    order = []
    while (job := store.claim_next(engine)) is not None:
        order.append(job.person_id)
        store.finish(engine, job.id, "graded", None)
    return order


def test_the_queue_takes_students_in_turn(database: str) -> None:
    engine = _engine(database)
    for _ in range(4):
        store.add_job(engine, "ann", "test", b"x", "a.tar.gz")
    store.add_job(engine, "ben", "test", b"x", "b.tar.gz")
    store.add_job(engine, "cat", "test", b"x", "c.tar.gz")
    # ann queued four first: she still waits her turn behind one each of ben and cat
    assert _run_all(engine) == ["ann", "ben", "cat", "ann", "ann", "ann"]


def test_one_running_job_per_student(database: str) -> None:
    engine = _engine(database)
    store.add_job(engine, "ann", "test", b"x", "a.tar.gz")
    store.add_job(engine, "ann", "final", b"x", "a.tar.gz")
    first = store.claim_next(engine)
    assert first is not None and store.claim_next(engine) is None  # ann's second waits for her first
    store.add_job(engine, "ben", "test", b"x", "b.tar.gz")
    second = store.claim_next(engine)
    assert second is not None and second.person_id == "ben"


def test_a_restart_requeues_what_was_running_with_nothing_lost(database: str) -> None:
    engine = _engine(database)
    job_id = store.add_job(engine, "ann", "test", b"archive bytes", "a.tar.gz")
    claimed = store.claim_next(engine)
    assert claimed is not None and claimed.attempts == 1
    store.set_pid(engine, job_id, 12345)
    engine.dispose()
    again = db.open_db(database)  # as a restarted server opens it
    assert store.requeue_running(again) == [(job_id, 12345)]
    retried = store.claim_next(again)
    assert retried is not None and retried.id == job_id and retried.attempts == 2
    assert store.archive_of(again, job_id) == b"archive bytes"


def test_a_job_a_killed_server_was_grading_is_graded_after_a_restart(tmp_path: Path, database: str) -> None:
    engine = _engine(database)
    job_id = store.add_job(engine, "ann", "test", b"archive bytes", "a.tar.gz")
    server = subprocess.Popen(
        [sys.executable, "-c", CLAIMING_SERVER, database], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == str(job_id)
    finally:
        server.kill()  # kill -9: no clean-up of its own
        server.wait()
    assert store.get(engine, job_id).state == "running"  # type: ignore[union-attr]
    engine.dispose()
    restarted = db.open_db(database)
    setup = GradingSetup(
        spec=ROOT / "assignment.toml", device="cpu", secret="s", files=tmp_path / "files", hide=[], jobs=1
    )
    scheduler = Scheduler(restarted, setup, grade=fake_grade)
    try:
        assert scheduler.start() == [job_id]
        deadline = time.monotonic() + 20
        while (job := store.get(restarted, job_id)) is not None and job.state != "graded":
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
    finally:
        scheduler.stop()
    assert job is not None and job.attempts == 2 and job.result is not None and job.pid is None
    assert store.archive_of(restarted, job_id) == b"archive bytes"


def test_an_overlong_name_from_a_roster_is_cut_to_its_column(database: str) -> None:
    engine = _engine(database, people=())
    token = tokens.issue(engine, tokens.Person("ann", "A" * 300, "a@x.edu"))
    person = tokens.authenticate(engine, token)
    assert person is not None and person.name == "A" * 200 and person.email == "a@x.edu"


def test_an_orphan_is_ended_only_when_it_is_ours(tmp_path: Path) -> None:
    files = tmp_path / "files"
    ours = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "grader.cli", "grade", str(files / "jobs")],
        start_new_session=True,
    )
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        time.sleep(0.2)
        assert not end_orphan(other.pid, files)
        assert end_orphan(ours.pid, files)
        assert ours.wait(timeout=10) == -9
        assert other.poll() is None
    finally:
        for proc in (ours, other):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()


def test_a_new_database_gets_the_schema_and_opening_it_again_changes_nothing(database: str) -> None:
    def changes() -> list[str]:
        statements: list[str] = []

        def record(_conn, _cursor, statement, *_rest) -> None:  # type: ignore[no-untyped-def]
            statements.append(statement)

        event.listen(Engine, "before_cursor_execute", record)
        try:
            db.open_db(database).dispose()
        finally:
            event.remove(Engine, "before_cursor_execute", record)
        return [s for s in statements if re.match(r"\s*(CREATE|ALTER|DROP|INSERT|UPDATE|DELETE)\b", s, re.I)]

    assert any(s.lstrip().upper().startswith("CREATE TABLE") for s in changes())
    assert changes() == []  # the second start: nothing to migrate
    engine = db.open_db(database)
    with engine.connect() as conn:
        assert db.current_version(conn) == db.SCHEMA_VERSION
        assert {"meta", "people", "jobs"} <= set(inspect(conn).get_table_names())
    engine.dispose()


def test_a_database_from_a_newer_grader_is_refused(database: str) -> None:
    engine = _engine(database)
    with engine.begin() as conn:
        db.set_meta(conn, "schema_version", str(db.SCHEMA_VERSION + 1))
    with pytest.raises(db.SchemaError, match="newer than this grader's"):
        db.open_db(database)


def test_a_database_of_something_else_is_refused(database: str) -> None:
    other = create_engine(db.database_url(database))
    with other.begin() as conn:
        conn.execute(text("CREATE TABLE users (id INTEGER)"))
    other.dispose()
    with pytest.raises(db.SchemaError, match="no service schema"):
        db.open_db(database)


def test_the_database_is_the_servers_alone(database: str) -> None:
    _engine(database)
    assert Path(database).stat().st_mode & 0o077 == 0


def test_quota_windows_slide() -> None:
    now = 100_000.0
    quota = Quota(per_hour=2, per_day=3)
    assert check(quota, "test", [now - 10], now) is None
    hour = check(quota, "test", [now - 3000, now - 10], now)
    assert hour is not None and hour.limit == "test per hour" and hour.resets_at == now - 3000 + 3600
    day = check(quota, "test", [now - 80_000, now - 70_000, now - 5000], now)
    assert day is not None and day.limit == "test per day" and day.resets_at == now - 80_000 + 86_400
    assert check(Quota(per_hour=0), "final", [], now) is not None  # 0: that mode is closed
