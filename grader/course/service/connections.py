"""Connections a handful of idle sockets cannot exhaust: a per-address cap and a header time-out.

uvicorn refuses requests (503) once `limit_concurrency` connections are open, and an open
connection that never finishes its request headers is kept forever: 200 idle sockets from one
student would shut the service for everyone. This protocol (uvicorn's h11 one, as `grader serve`
runs it) closes a new connection from an address that already holds MAX_PER_ADDRESS, and closes
any connection whose next request's headers have not all arrived HEADER_TIMEOUT_S after it
opened or after its last response began (uvicorn's keep-alive time-out alone is cancelled by
the first byte of a request). A body's time is bounded where it is read (limits.read_body).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.h11_impl import H11Protocol

#: open connections one client address may hold (a browser opens about six)
MAX_PER_ADDRESS = 32
#: seconds a connection may take to send a request's headers
HEADER_TIMEOUT_S = 10.0


class GuardedH11Protocol(H11Protocol):
    max_per_address = MAX_PER_ADDRESS
    header_timeout_s = HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = None
        host = self.client[0] if self.client else None
        same = sum(1 for c in self.connections if getattr(c, "client", None) and c.client[0] == host)  # type: ignore[attr-defined]
        if host is not None and same > self.max_per_address:
            transport.close()
            return
        self._await_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._header_timer is None and (self.cycle is None or self.cycle.response_complete):
            self._await_headers()  # a new request begins: its headers get the time-out too

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        waiting_on = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_due, waiting_on)

    def _headers_due(self, waiting_on: object) -> None:
        self._header_timer = None
        if self.cycle is waiting_on and (self.cycle is None or self.cycle.response_complete):
            self.transport.close()  # no new request's headers came in time
