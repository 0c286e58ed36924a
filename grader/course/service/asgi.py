"""The ASGI app: the API and the pages, the rate limit in front of both, and the queue's life.

The rate limit knows who is asking before it counts: a valid token (header or cookie) is
counted against its owner, everything else against one shared anonymous budget, and an API
request whose Bearer token is not valid is refused (401) right after that count.

The queue's workers start with the app (after the jobs a killed server left running are put
back in the queue) and stop with it; uvicorn serves it (`grader serve`).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from grader.course.service.app import API, COOKIE, INVALID_TOKEN, Refused, Server, bearer, person_for
from grader.course.service.pages import PAGES, page


def client_key(request: Request) -> str:
    """Whom a request is counted against: the person its valid token names, else "anonymous"."""
    token = bearer(request) or request.cookies.get(COOKIE)
    person = person_for(request, token) if token else None
    return "anonymous" if person is None else "person:" + person.id


class RateLimit(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        server: Server = request.app.state.server
        key = await run_in_threadpool(client_key, request)
        limiter = server.anonymous if key == "anonymous" else server.limiter
        wait = limiter.allow(key)
        if wait is not None:
            seconds = str(max(1, math.ceil(wait)))
            return JSONResponse(
                {"error": f"too many requests: try again in {seconds} s", "limit": "rate"},
                status_code=429,
                headers={"Retry-After": seconds},
            )
        if key == "anonymous" and bearer(request) and request.url.path.startswith("/api/"):
            return JSONResponse({"error": INVALID_TOKEN}, status_code=401)
        return await call_next(request)


async def refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Refused)
    if request.url.path.startswith("/api/"):
        return JSONResponse(exc.body, status_code=exc.status)
    return page("error.html.j2", status=exc.status, message=exc.body["error"])


async def not_found(request: Request, exc: Exception) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": "no such endpoint"}, status_code=404)
    return HTMLResponse("not found", status_code=404)


def build_app(server: Server) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if server.scheduler is not None:
            server.scheduler.start()
        try:
            yield
        finally:
            if server.scheduler is not None:
                server.scheduler.stop()

    app = Starlette(
        routes=[*API, *PAGES],
        middleware=[Middleware(RateLimit)],
        exception_handlers={Refused: refused, 404: not_found},
        lifespan=lifespan,
    )
    app.state.server = server
    return app
