"""The HTTP API (`/api/...`, a Bearer token per request) and the app that serves it with the pages.

Every route that reads a job finds it among the caller's own (`own_job`): another student's job
is "not found", the same answer as a job that does not exist, so ids cannot be probed. Staff
routes need a staff token. The API takes its token from the Authorization header only and the
pages from their cookie only, so a page's cookie can never make an API call for another site.
"""

from __future__ import annotations

import math
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from grader.course.batch import archives
from grader.course.leaderboard.names import leaderboard_alias
from grader.course.service import quotas, store, tokens, uploads, views
from grader.course.service.limits import ANONYMOUS_PER_MINUTE, RateLimiter, SlowBody, TooLarge, read_body
from grader.course.service.scheduler import Scheduler
from grader.engine.records.report import render_html
from grader.engine.spec.model import MODES, Assignment, Quota

COOKIE = "grader_token"
INVALID_TOKEN = "this token is not valid (mistyped, replaced or revoked): ask staff for yours"


@dataclass
class Server:
    """What every route needs: the database, the public spec, the quotas and the queue."""

    engine: Engine
    assignment: Assignment  # public cases only: names of problems and modules, the [service] table
    device: str
    quota: dict[str, Quota]
    scheduler: Scheduler | None = None
    limiter: RateLimiter = field(default_factory=RateLimiter)  # per person
    refusals: uploads.RefusalBudget = field(default_factory=uploads.RefusalBudget)
    anonymous: RateLimiter = field(default_factory=lambda: RateLimiter(ANONYMOUS_PER_MINUTE))  # one shared key
    clock: Callable[[], float] = time.time
    submit_lock: threading.Lock = field(default_factory=threading.Lock)
    #: the key of the leaderboard's pseudonyms (serving.alias_secret); None: no public leaderboard
    alias_secret: str | None = None

    @property
    def service(self):  # type: ignore[no-untyped-def]
        return self.assignment.service

    def wake(self) -> None:
        if self.scheduler is not None:
            self.scheduler.wake.set()


class Refused(Exception):
    """An HTTP error with a JSON body: {"error": ...} and what else the client should know."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.body = status, {"error": message, **extra}


def bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header[:7].lower() == "bearer " else None


def person_for(request: Request, token: str | None) -> tokens.Person | None:
    """Who holds `token`, looked up once per request (the rate limit asks first, the route again)."""
    known: dict[str, tokens.Person | None] = request.scope.setdefault("state", {}).setdefault("grader_people", {})
    if (token or "") not in known:
        known[token or ""] = tokens.authenticate(request.app.state.server.engine, token)
    return known[token or ""]


def caller(request: Request, staff: bool = False) -> tokens.Person:
    token = bearer(request)
    if not token:
        raise Refused(401, "no token: pass your token (grader submit --token, or GRADER_TOKEN)")
    person = person_for(request, token)
    if person is None:
        raise Refused(401, INVALID_TOKEN)
    if staff and not person.staff:
        raise Refused(403, "staff only")
    return person


def public_alias_secret(server: Server) -> str:
    """The pseudonyms' key; without one the leaderboard is not published (a guessable key undoes them)."""
    if not server.alias_secret:
        raise Refused(503, "the leaderboard is not published: the server has no pseudonym secret (see grader serve)")
    return server.alias_secret


def own_job(server: Server, person: tokens.Person, job_id: str) -> store.Job:
    job = store.get(server.engine, int(job_id)) if job_id.isdigit() and len(job_id) < 12 else None
    if job is None or job.person_id != person.id or job.rerun_of is not None:
        raise Refused(404, f"no submission {job_id[:20]} of yours")
    return job


def quota_left(server: Server, person_id: str) -> dict[str, Any]:
    now = server.clock()
    return {
        mode: quotas.remaining(
            server.quota[mode], store.made_times(server.engine, person_id, mode, now - quotas.DAY), now
        )
        for mode in MODES
    }


def check_submission(
    server: Server, person: tokens.Person, mode: str, problems: list[str], now: float | None = None
) -> bool:
    """Whether the submission may be made at `now`, and whether it is late then; Refused otherwise."""
    if mode not in MODES:
        raise Refused(400, f"unknown mode {mode[:20]!r} (one of {', '.join(MODES)})")
    known = [p.name for p in server.assignment.problems]
    unknown = [p for p in problems if p not in known]
    if unknown:
        raise Refused(400, f"unknown problem(s) {', '.join(unknown)[:200]} (the assignment has {', '.join(known)})")
    if mode in ("benchmark", "profile") and server.device != "cuda":
        raise Refused(409, f"{mode} needs a GPU: this server grades on the CPU (Triton's interpreter)")
    now = server.clock() if now is None else now
    refusal, late = quotas.deadline_refusal(server.service, mode, now)
    if refusal is None:
        made = store.made_times(server.engine, person.id, mode, now - quotas.DAY)
        refusal = quotas.check(server.quota[mode], mode, made, now)
    if refusal is not None:
        raise Refused(429 if refusal.limit != "deadline" else 403, refusal.message, **refusal.as_dict())
    return late


def archive_name(text: str | None) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(text or "submission.tar.gz").name)[-100:]
    if archives.archive_suffix(Path(name)) is None:
        raise Refused(400, f"{name}: not a supported archive (use `grader pack`: a .tar.gz, or a .zip)")
    return name


async def read_upload(request: Request, server: Server, person: tokens.Person, name: str) -> bytes:
    """The upload's bytes, once they are a submission; each refusal counts against `person`."""
    wait = server.refusals.wait(person.id)
    if wait is not None:
        raise Refused(
            429,
            f"{server.refusals.per_hour} refused uploads in the last hour: the next upload is read in "
            f"{max(1, math.ceil(wait))} s (check yours with `grader pack`, which checks what the server does)",
            limit="refused uploads",
        )
    try:
        data = await read_body(request, server.service.max_upload_bytes)
    except TooLarge as exc:
        server.refusals.add(person.id)
        raise Refused(413, f"{exc} (a packed submission is a few kilobytes)") from None
    except SlowBody as exc:
        server.refusals.add(person.id)
        raise Refused(408, str(exc)) from None
    modules = [p.module for p in server.assignment.problems]
    problem = await run_in_threadpool(uploads.archive_problem, data, name, modules)
    if problem is not None:
        server.refusals.add(person.id)
        raise Refused(422, f"bad archive: {problem}")
    return data


async def submit(request: Request) -> Response:
    server: Server = request.app.state.server
    person = await run_in_threadpool(caller, request)
    mode = request.query_params.get("mode", "test")
    problems = [p for p in request.query_params.get("problems", "").split(",") if p]
    name = archive_name(request.query_params.get("name"))
    # refused early when it would be refused anyway; lateness is judged once the upload is whole
    await run_in_threadpool(check_submission, server, person, mode, problems)
    data = await read_upload(request, server, person, name)

    def add() -> int:
        with server.submit_lock:  # two uploads at once cannot both take the last one of a quota
            accepted = server.clock()  # THE time of a submission: its deadline, its lateness, its quota
            late = check_submission(server, person, mode, problems, accepted)
            return store.add_job(server.engine, person.id, mode, data, name, problems, late, created_at=accepted)

    job_id = await run_in_threadpool(add)
    server.wake()
    job = store.get(server.engine, job_id)
    assert job is not None
    return JSONResponse(views.student_view(server.engine, job, server.service, None), status_code=202)


def list_submissions(request: Request) -> Response:
    server: Server = request.app.state.server
    person = caller(request)
    published = store.published_at(server.engine)
    rows = []
    for job in store.jobs_of(server.engine, person.id):
        result, withheld = views.visible_result(job, server.service, published, server.clock())
        rows.append(
            {**_brief(job), "state": views.shown_state(job, withheld), **views.summary(result), "withheld": withheld}
        )
    return JSONResponse({"student": person.id, "submissions": rows, "quota": quota_left(server, person.id)})


def _brief(job: store.Job) -> dict[str, Any]:
    return {
        "id": job.id,
        "mode": job.mode,
        "state": job.state,
        "created_at": quotas.iso(job.created_at),
        "late": job.late,
    }


def one_submission(request: Request) -> Response:
    server: Server = request.app.state.server
    job = own_job(server, caller(request), request.path_params["job"])
    published = store.published_at(server.engine)
    return JSONResponse(views.student_view(server.engine, job, server.service, published, server.clock()))


def report(request: Request) -> Response:
    server: Server = request.app.state.server
    job = own_job(server, caller(request), request.path_params["job"])
    result, withheld = views.visible_result(job, server.service, store.published_at(server.engine), server.clock())
    if result is None:
        raise Refused(404, withheld or f"submission {job.id} has no result yet ({job.state})")
    return HTMLResponse(render_html(result, leaderboard_alias(result.submission.student, result.assignment.name)))


def me(request: Request) -> Response:
    server: Server = request.app.state.server
    person = caller(request)
    return JSONResponse(
        {"id": person.id, "name": person.name, "role": person.role, "quota": quota_left(server, person.id)}
    )


def leaderboard(request: Request) -> Response:
    server: Server = request.app.state.server
    rows = views.standings(server.engine, server.service, public_alias_secret(server), server.clock())
    return JSONResponse({"rows": [s.row(n) for n, s in enumerate(rows, start=1)]})


def staff_queue(request: Request) -> Response:
    server: Server = request.app.state.server
    caller(request, staff=True)
    return JSONResponse(staff_overview(server))


def staff_overview(server: Server) -> dict[str, Any]:
    active = store.all_jobs(server.engine, store.ACTIVE)
    return {
        "queued": [{**_brief(j), "student": j.person_id} for j in active if j.state == "queued"],
        "running": [
            {**_brief(j), "student": j.person_id, "attempts": j.attempts} for j in active if j.state == "running"
        ],
        "counts": store.counts(server.engine),
        "published_at": quotas.iso(store.published_at(server.engine)),
        "reruns": views.side_by_side(server.engine),
    }


def rerun_top(server: Server, n: int) -> list[int]:
    """The leaderboard's top `n` graded again under one new secret, beside their first runs."""
    secret = secrets.token_hex(32)
    made = []
    for standing in views.standings(server.engine, server.service, None)[:n]:
        job = standing.job
        data = store.archive_of(server.engine, job.id)
        made.append(
            store.add_job(
                server.engine,
                job.person_id,
                job.mode,
                data,
                job.archive_name,
                job.problem_list,
                job.late,
                job.id,
                secret,
            )
        )
    server.wake()
    return made


def staff_rerun_top(request: Request) -> Response:
    server: Server = request.app.state.server
    caller(request, staff=True)
    text = request.query_params.get("n", "10")
    n = int(text) if text.isdigit() and 0 < int(text) <= 1000 else None
    if n is None:
        raise Refused(400, "n: a number of students from 1 to 1000")
    return JSONResponse({"rerun": rerun_top(server, n)}, status_code=202)


def staff_requeue(request: Request) -> Response:
    server: Server = request.app.state.server
    caller(request, staff=True)
    job = store.get(server.engine, int(request.path_params["job"]))
    if job is None:
        raise Refused(404, "no such job")
    if job.state in store.ACTIVE:
        raise Refused(409, f"job {job.id} is {job.state} already")
    store.requeue(server.engine, job.id)
    server.wake()
    return JSONResponse({"requeued": job.id}, status_code=202)


def staff_publish(request: Request) -> Response:
    server: Server = request.app.state.server
    caller(request, staff=True)
    return JSONResponse({"published_at": quotas.iso(store.publish(server.engine))})


API = [
    Route("/api/submissions", submit, methods=["POST"]),
    Route("/api/submissions", list_submissions, methods=["GET"]),
    Route("/api/submissions/{job}", one_submission, methods=["GET"]),
    Route("/api/submissions/{job}/report", report, methods=["GET"]),
    Route("/api/me", me, methods=["GET"]),
    Route("/api/leaderboard", leaderboard, methods=["GET"]),
    Route("/api/staff/queue", staff_queue, methods=["GET"]),
    Route("/api/staff/rerun-top", staff_rerun_top, methods=["POST"]),
    Route("/api/staff/jobs/{job:int}/rerun", staff_requeue, methods=["POST"]),
    Route("/api/staff/publish", staff_publish, methods=["POST"]),
]
