"""The service's app on a real uvicorn, in a thread of the test, on 127.0.0.1 and a free port.

The same settings as `grader serve` (serving.uvicorn_config) and the stand-in gradings of
service_support: what a student on this machine could do to the running server, in seconds.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from grader.course.service.app import Server
from grader.course.service.asgi import build_app
from grader.course.service.serving import uvicorn_config
from grader.engine.spec.model import Service
from tests.grader.course.service.service_support import archive, make_server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Live:
    port: int
    server: Server
    tokens: dict[str, str]
    http: httpx.Client

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def as_(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def submit(self, who: str, mode: str = "test", data: bytes | None = None) -> httpx.Response:
        return self.http.post(
            "/api/submissions",
            params={"mode": mode, "name": "submission.tar.gz"},
            content=archive() if data is None else data,
            headers=self.as_(who),
        )


@contextmanager
def live(tmp_path: Path, service: Service | None = None, **options: Any) -> Iterator[Live]:
    """A running server; stopped (its connections closed, its queue ended) on leaving."""
    server, issued = make_server(tmp_path, service, **options)
    port = free_port()
    runner = uvicorn.Server(uvicorn_config(build_app(server), "127.0.0.1", port, log_level="warning"))
    thread = threading.Thread(target=runner.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not runner.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield Live(port, server, issued, http)
    finally:
        runner.should_exit = True
        thread.join(timeout=30)
