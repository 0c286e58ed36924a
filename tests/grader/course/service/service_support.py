"""A service on a temporary SQLite file (or the `database` fixture's) whose gradings are stand-ins:
the HTTP rules tested in seconds."""

from __future__ import annotations

import io
import tarfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from grader.course.service import db, store, tokens
from grader.course.service.app import Server
from grader.course.service.asgi import build_app
from grader.course.service.jobs import GradingSetup, Outcome
from grader.course.service.limits import RateLimiter
from grader.course.service.quotas import effective
from grader.course.service.scheduler import Scheduler
from grader.engine.assignment.load import load_assignment
from grader.engine.records.model import AssignmentRef, ProblemResult, Result, RunEnvironment, SubmissionRef
from grader.engine.spec.model import Service

MODULES = ["gelu", "softmax", "matmul", "flash_attention"]
ALIAS_SECRET = "the-staffs-pseudonym-key-0123456789"


def archive(files: dict[str, str] | None = None) -> bytes:
    """A .tar.gz as `grader pack` writes one."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in (files or {f"{m}.py": "# stub\n" for m in MODULES}).items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def fake_grade(setup: GradingSetup, job_id: int, attempt: int, student: str, mode: str, *rest: Any) -> Outcome:
    """A graded record, instantly: 10 / 15 on gelu, with worker output that must not leak from a final."""
    result = Result(
        assignment=AssignmentRef(name="triton-kernels", version="2026.1"),
        submission=SubmissionRef(path="upload", sha256="0" * 64, student=student),
        environment=RunEnvironment(device="cpu", torch="", triton="", python=""),
        score=10.0,
        max_score=15.0,
        duration_s=0.1,
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        problems=[
            ProblemResult(name="gelu", score=10.0, max_score=15.0, status="passed", output="HIDDEN-SHAPE (8, 333, 129)")
        ],
    )
    return Outcome("graded", result)


@dataclass
class Service_:
    client: TestClient
    server: Server
    tokens: dict[str, str]

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def submit(self, who: str, mode: str = "test", data: bytes | None = None, **params: str) -> Any:
        return self.client.post(
            "/api/submissions",
            params={"mode": mode, "name": "submission.tar.gz", **params},
            content=archive() if data is None else data,
            headers=self.as_(who),
        )

    def wait(self, who: str, job_id: int, timeout: float = 20.0) -> dict[str, Any]:
        """`who`'s view of the job once it is done (as staff know it: a final shows students no state)."""
        settle(self.server, job_id, timeout)
        return self.client.get(f"/api/submissions/{job_id}", headers=self.as_(who)).json()  # type: ignore[no-any-return]


def settle(server: Server, job_id: int, timeout: float = 20.0) -> store.Job:
    """The job once it is graded or failed, read from the database."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = store.get(server.engine, job_id)
        if job is not None and job.state not in store.ACTIVE:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} is not done after {timeout} s")


def cookie(s: Service_, who: str) -> dict[str, str]:
    """What a browser logged in as `who` sends."""
    return {"cookie": f"grader_token={s.tokens[who]}"}


def make_server(
    tmp_path: Path,
    service: Service | None = None,
    quota: int | None = None,
    device: str = "cpu",
    rate: int = 10_000,
    database: str | None = None,  # a --db; None: a SQLite file in tmp_path
    anonymous_rate: int = 10_000,
    alias_secret: str | None = ALIAS_SECRET,
) -> tuple[Server, dict[str, str]]:
    """The service's Server with three people (alice, bob: students; ta: staff) and their tokens."""
    engine = db.open_db(database or str(tmp_path / "grades.sqlite"))
    issued = {}
    for who, role in (("alice", "student"), ("bob", "student"), ("ta", "staff")):
        issued[who] = tokens.issue(engine, tokens.Person(who, who.title(), f"{who}@example.edu", role))
    assignment = load_assignment(hidden=False)
    if service is not None:
        assignment = assignment.model_copy(update={"service": service})
    setup = GradingSetup(
        spec=Path("assignment.toml"), device=device, secret="s", files=tmp_path / "files", hide=[], jobs=1
    )
    server = Server(
        engine,
        assignment,
        device,
        effective(assignment.service, quota),  # type: ignore[arg-type]
        limiter=RateLimiter(rate),
        anonymous=RateLimiter(anonymous_rate),
        alias_secret=alias_secret,
    )
    server.scheduler = Scheduler(engine, setup, grade=fake_grade)
    return server, issued


@contextmanager
def service(tmp_path: Path, service: Service | None = None, **options: Any) -> Iterator[Service_]:
    """The app in this process, through Starlette's test client."""
    server, issued = make_server(tmp_path, service, **options)
    with TestClient(build_app(server)) as client:
        yield Service_(client, server, issued)
