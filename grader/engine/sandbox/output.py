"""The worker's stdout and stderr: drained without limit, kept up to a cap, shown without noise."""

from __future__ import annotations

import os
import re
import threading

# the profiler's own log lines (kineto prints them whatever its log level): not the student's output
PROFILER_NOISE = re.compile(r"^(USDT|INFO|WARNING):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \S+\.cpp:\d+\]")


class CapturedStream:
    """Drains a pipe in a thread, keeping the first `limit` bytes and counting the rest.

    The rest is read and discarded, never stored: a worker printing a gigabyte costs a gigabyte of
    pipe traffic, not a gigabyte of the grader's memory, and never blocks on a full pipe.
    """

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self.kept = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)
        os.close(self.fd)

    def text(self) -> str:
        self.thread.join(timeout=2)
        body = self.kept.decode("utf-8", errors="replace")
        return body + (f"\n[... {self.dropped} more bytes not kept]" if self.dropped else "")


def combined(notes: list[str], stdout: CapturedStream, stderr: CapturedStream) -> str:
    """The grader's notes, then what the worker printed, each under its label."""
    parts = []
    if notes:
        parts.append("--- grader ---\n" + "\n".join(notes))
    for label, stream in (("stdout", stdout), ("stderr", stderr)):
        text = "\n".join(line for line in stream.text().splitlines() if not PROFILER_NOISE.match(line)).strip()
        if text:
            parts.append(f"--- {label} ---\n{text}")
    return "\n".join(parts)
