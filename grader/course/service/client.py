"""What `grader submit` and `grader submissions` speak to a server: the standard library only.

A student's machine has the handout's install and nothing of the server's (no Starlette, no
SQLAlchemy): urllib is enough for a few JSON calls and one upload.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: how often a waiting `grader submit` asks (30 a minute: within the server's rate limit)
POLL_S = 2.0
TIMEOUT_S = 60.0


class ServerError(Exception):
    """The server refused or could not be reached; `status` 0 when nothing answered."""

    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.body = status, body or {}


@dataclass
class Client:
    server: str
    token: str

    def _call(self, method: str, path: str, data: bytes | None = None, content_type: str = "") -> Any:
        url = self.server.rstrip("/") + path
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                body = json.loads(exc.read().decode("utf-8"))
            except ValueError:
                body = {}
            message = body.get("error") if isinstance(body, dict) else None
            raise ServerError(exc.code, message or f"HTTP {exc.code} {exc.reason}", body) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServerError(0, f"cannot reach {self.server}: {reason}") from None

    def submit(self, archive: bytes, name: str, mode: str, problems: list[str] | None) -> dict[str, Any]:
        query = urllib.parse.urlencode({"mode": mode, "problems": ",".join(problems or []), "name": name})
        return self._call("POST", f"/api/submissions?{query}", archive, "application/octet-stream")  # type: ignore[no-any-return]

    def submission(self, job_id: int) -> dict[str, Any]:
        return self._call("GET", f"/api/submissions/{job_id}")  # type: ignore[no-any-return]

    def submissions(self) -> dict[str, Any]:
        return self._call("GET", "/api/submissions")  # type: ignore[no-any-return]

    def wait(self, job_id: int, progress: Callable[[dict[str, Any]], None], poll_s: float = POLL_S) -> dict[str, Any]:
        """Poll until the job is graded or errored; `progress` sees every state on the way."""
        while True:
            view = self.submission(job_id)
            progress(view)
            if view["state"] not in ("queued", "running"):
                return view
            time.sleep(poll_s)
