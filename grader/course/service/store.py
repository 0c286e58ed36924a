"""Every read and write of the service's jobs: one function per question, one transaction each.

The queue is the jobs table itself: a job is queued, running, graded or error, and nothing about
it lives only in memory, so a restart finds the queue as it was (running jobs go back to the
queue: `requeue_running`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, fields

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from grader.course.service.db import get_meta, jobs, people, set_meta

ACTIVE = ("queued", "running")
PUBLISHED = "finals_published_at"


@dataclass
class Job:
    """A job as the service reads it (its archive bytes only when asked for)."""

    id: int
    person_id: str
    mode: str
    problems: str
    state: str
    archive_name: str
    archive_sha256: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    attempts: int
    late: bool
    result: str | None
    error: str
    rerun_of: int | None
    secret: str | None
    pid: int | None

    @property
    def problem_list(self) -> list[str] | None:
        return self.problems.split(",") if self.problems else None


_COLUMNS = [jobs.c[f.name] for f in fields(Job)]


def _job(row: object) -> Job:
    return Job(**{f.name: getattr(row, f.name) for f in fields(Job)})


def add_job(
    engine: Engine,
    person_id: str,
    mode: str,
    archive: bytes,
    archive_name: str,
    problems: list[str] | None = None,
    late: bool = False,
    rerun_of: int | None = None,
    secret: str | None = None,
    created_at: float | None = None,
) -> int:
    """A queued job; `created_at` is when the service accepted it (the whole upload read and checked)."""
    with engine.begin() as conn:
        done = conn.execute(
            jobs.insert().values(
                person_id=person_id,
                mode=mode,
                problems=",".join(problems or []),
                state="queued",
                archive=archive,
                archive_name=archive_name,
                archive_sha256=hashlib.sha256(archive).hexdigest(),
                created_at=time.time() if created_at is None else created_at,
                attempts=0,
                late=late,
                error="",
                rerun_of=rerun_of,
                secret=secret,
            )
        )
        return int(done.inserted_primary_key[0])


def get(engine: Engine, job_id: int) -> Job | None:
    with engine.connect() as conn:
        row = conn.execute(select(*_COLUMNS).where(jobs.c.id == job_id)).first()
    return None if row is None else _job(row)


def archive_of(engine: Engine, job_id: int) -> bytes:
    with engine.connect() as conn:
        return bytes(conn.execute(select(jobs.c.archive).where(jobs.c.id == job_id)).scalar_one())


def jobs_of(engine: Engine, person_id: str) -> list[Job]:
    """A student's own submissions, newest first (staff re-runs of their work are not theirs to see)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(*_COLUMNS).where(jobs.c.person_id == person_id, jobs.c.rerun_of.is_(None)).order_by(jobs.c.id.desc())
        )
        return [_job(r) for r in rows]


def all_jobs(engine: Engine, states: tuple[str, ...] | None = None) -> list[Job]:
    query = select(*_COLUMNS).order_by(jobs.c.id)
    if states:
        query = query.where(jobs.c.state.in_(states))
    with engine.connect() as conn:
        return [_job(r) for r in conn.execute(query)]


def made_times(engine: Engine, person_id: str, mode: str, since: float) -> list[float]:
    """When this student's submissions of `mode` were made, since `since` (for the quotas)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(jobs.c.created_at).where(
                jobs.c.person_id == person_id,
                jobs.c.mode == mode,
                jobs.c.rerun_of.is_(None),
                jobs.c.created_at > since,
            )
        )
        return [float(r[0]) for r in rows]


def ahead_of(engine: Engine, job: Job) -> int:
    """Jobs queued before this one (a rough place in the line: the queue is fair, not first-come)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).where(jobs.c.state == "queued", jobs.c.id < job.id)).scalar_one())


def claim_next(engine: Engine) -> Job | None:
    """The next job to grade, marked running: fair between students.

    Only students with no job running are considered (one at a time each); among them the one
    whose last grading started longest ago (never first), and that student's oldest queued job.
    So a student with ten jobs queued takes turns with one who has one: round-robin.
    """
    with engine.begin() as conn:
        busy = select(jobs.c.person_id).where(jobs.c.state == "running")
        waiting = conn.execute(
            select(jobs.c.person_id, func.min(jobs.c.id))
            .where(jobs.c.state == "queued", jobs.c.person_id.not_in(busy))
            .group_by(jobs.c.person_id)
        ).all()
        if not waiting:
            return None
        last = dict(
            conn.execute(
                select(jobs.c.person_id, func.max(jobs.c.started_at))
                .where(jobs.c.person_id.in_([p for p, _ in waiting]))
                .group_by(jobs.c.person_id)
            ).all()
        )
        person, first = min(waiting, key=lambda w: (last.get(w[0]) or 0.0, w[1]))
        # only if still queued: another process on the same PostgreSQL database (read committed) may
        # have claimed it since the selects above; then it is theirs and this claim takes none
        claimed = conn.execute(
            jobs.update()
            .where(jobs.c.id == first, jobs.c.state == "queued")
            .values(state="running", started_at=time.time(), attempts=jobs.c.attempts + 1, pid=None)
        )
        if claimed.rowcount != 1:
            return None
        row = conn.execute(select(*_COLUMNS).where(jobs.c.id == first)).one()
    return _job(row)


def set_pid(engine: Engine, job_id: int, pid: int | None) -> None:
    with engine.begin() as conn:
        conn.execute(jobs.update().where(jobs.c.id == job_id).values(pid=pid))


def finish(engine: Engine, job_id: int, state: str, result: str | None, error: str = "") -> None:
    with engine.begin() as conn:
        conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(state=state, result=result, error=error[:4000], finished_at=time.time(), pid=None)
        )


def requeue(engine: Engine, job_id: int) -> None:
    """Staff's re-run of the same job, or a job whose grading the server lost."""
    with engine.begin() as conn:
        conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(state="queued", result=None, error="", finished_at=None, pid=None)
        )


def requeue_running(engine: Engine) -> list[tuple[int, int | None]]:
    """At start-up: what a killed server was grading goes back to the queue. Returns (id, child pid)."""
    with engine.begin() as conn:
        rows = conn.execute(select(jobs.c.id, jobs.c.pid).where(jobs.c.state == "running")).all()
        conn.execute(jobs.update().where(jobs.c.state == "running").values(state="queued", pid=None))
    return [(int(r[0]), r[1]) for r in rows]


def counts(engine: Engine) -> dict[str, dict[str, int]]:
    """Per student: jobs in each state (staff re-runs included)."""
    out: dict[str, dict[str, int]] = {}
    with engine.connect() as conn:
        for person, state, n in conn.execute(
            select(jobs.c.person_id, jobs.c.state, func.count()).group_by(jobs.c.person_id, jobs.c.state)
        ):
            out.setdefault(person, {})[state] = int(n)
    return out


def students(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(people.c.id).where(people.c.role == "student").order_by(people.c.id))]


def published_at(engine: Engine) -> float | None:
    with engine.connect() as conn:
        value = get_meta(conn, PUBLISHED)
    return None if value is None else float(value)


def publish(engine: Engine) -> float:
    now = time.time()
    with engine.begin() as conn:
        set_meta(conn, PUBLISHED, repr(now))
    return now
