"""The worker's start, step by step (sent with its greeting: GRADER_TRACE shows where it went),
and the handshake that begins it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from grader.engine import protocol


def go_ahead(req_fd: int, rep_fd: int) -> bool:
    """Say `Imported` (this process's imports done, nothing of the submission run) and wait for the
    orchestrator's StartRequest; False when it sends an exit instead, or is gone (the grading ended)."""
    for fd in (req_fd, rep_fd):
        os.set_inheritable(fd, False)
    protocol.send(rep_fd, protocol.Imported())
    try:
        go = protocol.parse_request(protocol.recv(req_fd)[0])
    except protocol.PeerGone:
        return False
    return isinstance(go, protocol.StartRequest)


class Steps:
    """The worker's start, step by step (sent with its greeting: GRADER_TRACE shows them)."""

    def __init__(self) -> None:
        self.last, self.taken = time.monotonic() - age_s(), {}

    def done(self, step: str) -> None:
        now = time.monotonic()
        self.taken[step] = round(now - self.last, 4)
        self.last = now


def age_s() -> float:
    """How long ago this process started (Linux: its start time in /proc; elsewhere 0)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
