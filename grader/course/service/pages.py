"""The HTML pages: the live leaderboard (public), a student's own page, and the staff page.

A page knows its reader by a cookie set at /login (HttpOnly, SameSite=Strict); the staff page's
buttons are forms that post with it, and a post whose Origin is another site is refused, so
another page cannot press them. Templates live beside this module (jinja2, autoescaped).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from grader.course.leaderboard.names import leaderboard_alias
from grader.course.service import store, tokens, views
from grader.course.service.app import (
    COOKIE,
    Refused,
    Server,
    public_alias_secret,
    quota_left,
    rerun_top,
    staff_overview,
)
from grader.course.service.limits import MAX_SMALL_BODY, SlowBody, TooLarge, read_body
from grader.course.service.quotas import iso
from grader.engine.records.report import render_html

TEMPLATES = Path(__file__).resolve().parent / "templates"
_ENV = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["pts"] = lambda x: "–" if x is None else f"{round(x, 2):g}"
_ENV.filters["when"] = iso


def page(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_ENV.get_template(name).render(**context), status_code=status)


def reader(request: Request) -> tokens.Person | None:
    server: Server = request.app.state.server
    return tokens.authenticate(server.engine, request.cookies.get(COOKIE))


async def form(request: Request) -> dict[str, str]:
    """A posted form's fields, after the same-site check."""
    origin = request.headers.get("origin")
    if origin and origin.split("://", 1)[-1] != request.headers.get("host", ""):
        raise Refused(403, "a form posted from another site")
    try:
        body = await read_body(request, MAX_SMALL_BODY)
    except TooLarge as exc:
        raise Refused(413, str(exc)) from None
    except SlowBody as exc:
        raise Refused(408, str(exc)) from None
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


def leaderboard_page(request: Request) -> Response:
    server: Server = request.app.state.server
    ranked = views.standings(server.engine, server.service, public_alias_secret(server), server.clock())
    return page(
        "leaderboard.html.j2",
        title=server.assignment.assignment.title,
        rows=[s.row(n) for n, s in enumerate(ranked, start=1)],
        finals=any(s.job.mode == "final" for s in ranked),
        # a place comes from a benchmark submission, which needs a GPU, or from the final grading
        on_cpu=server.device != "cuda",
    )


def login_page(request: Request) -> Response:
    return page("login.html.j2", error="")


async def login(request: Request) -> Response:
    server: Server = request.app.state.server
    token = (await form(request)).get("token", "").strip()
    person = tokens.authenticate(server.engine, token)
    if person is None:
        return page("login.html.j2", status=401, error="That token is not valid (mistyped, replaced or revoked).")
    response = RedirectResponse("/staff" if person.staff else "/me", status_code=303)
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", max_age=14 * 86400)
    return response


async def logout(request: Request) -> Response:
    await form(request)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response


def student_page(request: Request) -> Response:
    server: Server = request.app.state.server
    person = reader(request)
    if person is None:
        return RedirectResponse("/login", status_code=303)
    published = store.published_at(server.engine)
    rows = []
    for job in store.jobs_of(server.engine, person.id):
        result, withheld = views.visible_result(job, server.service, published, server.clock())
        rows.append(
            {
                "job": job,
                "state": views.shown_state(job, withheld),
                "withheld": withheld,
                "has_report": result is not None,
                **views.summary(result),
            }
        )
    return page(
        "student.html.j2",
        person=person,
        rows=rows,
        quota=quota_left(server, person.id),
        deadline=server.service.deadline,
    )


def student_report(request: Request) -> Response:
    server: Server = request.app.state.server
    person = reader(request)
    if person is None:
        return RedirectResponse("/login", status_code=303)
    job = store.get(server.engine, request.path_params["job"])
    if job is None or job.person_id != person.id or job.rerun_of is not None:
        raise Refused(404, "no such submission of yours")
    result, withheld = views.visible_result(job, server.service, store.published_at(server.engine), server.clock())
    if result is None:
        raise Refused(404, withheld or f"submission {job.id} has no result yet ({job.state})")
    alias = leaderboard_alias(result.submission.student, result.assignment.name)
    return HTMLResponse(render_html(result, alias, back="/me"))


def staff_page(request: Request) -> Response:
    server: Server = request.app.state.server
    person = reader(request)
    if person is None or not person.staff:
        return RedirectResponse("/login", status_code=303)
    finished = [j for j in store.all_jobs(server.engine, ("graded", "error"))][-50:]
    return page(
        "staff.html.j2",
        person=person,
        overview=staff_overview(server),
        finished=[{"job": j, **views.summary(views.result_of(j))} for j in reversed(finished)],
    )


async def staff_action(request: Request) -> Response:
    server: Server = request.app.state.server
    person = reader(request)
    if person is None or not person.staff:
        raise Refused(403, "staff only")
    fields = await form(request)
    action = request.path_params["action"]
    if action == "publish":
        store.publish(server.engine)
    elif action == "rerun-top":
        text = fields.get("n", "")
        if not text.isdigit() or not 0 < int(text) <= 1000:
            raise Refused(400, "n: a number of students from 1 to 1000")
        rerun_top(server, int(text))
    elif action == "requeue" and fields.get("job", "").isdigit():
        job = store.get(server.engine, int(fields["job"]))
        if job is not None and job.state not in store.ACTIVE:
            store.requeue(server.engine, job.id)
            server.wake()
    else:
        raise Refused(400, "unknown action")
    return RedirectResponse("/staff", status_code=303)


PAGES = [
    Route("/", lambda request: RedirectResponse("/leaderboard"), methods=["GET"]),
    Route("/leaderboard", leaderboard_page, methods=["GET"]),
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/logout", logout, methods=["POST"]),
    Route("/me", student_page, methods=["GET"]),
    Route("/me/submissions/{job:int}", student_report, methods=["GET"]),
    Route("/staff", staff_page, methods=["GET"]),
    Route("/staff/{action}", staff_action, methods=["POST"]),
]
