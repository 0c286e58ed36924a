"""Bounds on what a client may ask of the server: request sizes, and requests per minute.

An upload is read in chunks and refused as soon as it passes the `[service]` table's
`max_upload_bytes` (a Content-Length that says more is refused before anything is read); any
other body is small. The rate is per authenticated person (a valid token's owner), and every
request without a valid token shares one budget, so made-up tokens buy nothing: the limiter's
keys are the roster's people plus one, and none is ever forgotten to make room (forgetting
would reset a student's count). The windows slide, in memory: a restart forgets them, which
costs nothing (the quotas, which matter, are in the database).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque

from starlette.requests import Request

#: a form or a JSON body: a token, a number
MAX_SMALL_BODY = 16 << 10
#: requests a client may make per minute; `grader submit` polls every 2 s (30 a minute)
REQUESTS_PER_MINUTE = 120
#: seconds a request body may take to arrive whole (a connection that stalls is not held longer)
BODY_TIMEOUT_S = 60.0
#: requests per minute that every client without a valid token shares (the public leaderboard, /login)
ANONYMOUS_PER_MINUTE = 600


class SlowBody(Exception):
    def __init__(self, seconds: float) -> None:
        super().__init__(f"the request body did not arrive within {seconds:g} s")


class TooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit


async def read_body(request: Request, limit: int, timeout_s: float | None = None) -> bytes:
    """The body, or TooLarge past `limit` bytes, or SlowBody when it is not whole in `timeout_s`."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise TooLarge(limit)
    timeout_s = BODY_TIMEOUT_S if timeout_s is None else timeout_s
    chunks, total = [], 0
    stream = request.stream()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while True:
        try:
            chunk = await asyncio.wait_for(stream.__anext__(), max(0.0, deadline - loop.time()))
        except StopAsyncIteration:
            break
        except TimeoutError:
            raise SlowBody(timeout_s) from None
        total += len(chunk)
        if total > limit:
            raise TooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


class RateLimiter:
    """A sliding window per key; the caller picks keys from a bounded set (people, "anonymous")."""

    def __init__(self, limit: int = REQUESTS_PER_MINUTE, window_s: float = 60.0) -> None:
        #: events a key may have in any `window_s` seconds
        self.limit, self.window_s = limit, window_s
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def allow(self, client: str, now: float | None = None) -> float | None:
        """None when `client` may go on (and this request counts); else the seconds until it may."""
        now = time.monotonic() if now is None else now
        with self._lock:
            wait = self._wait(client, now)
            if wait is None:
                self._seen[client].append(now)
            return wait

    def wait(self, client: str, now: float | None = None) -> float | None:
        """As `allow`, without counting anything."""
        with self._lock:
            return self._wait(client, time.monotonic() if now is None else now)

    def add(self, client: str, now: float | None = None) -> None:
        """Count one more event for `client`, whether or not it was within the limit."""
        with self._lock:
            self._seen.setdefault(client, deque()).append(time.monotonic() if now is None else now)

    def _wait(self, client: str, now: float) -> float | None:
        times = self._seen.setdefault(client, deque())
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times[0] + self.window_s - now if len(times) >= self.limit else None

    @property
    def clients(self) -> int:
        """Keys held: the people who made a request in the window, and the anonymous budget."""
        return len(self._seen)
