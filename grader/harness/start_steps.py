"""The worker's start, step by step (sent with its greeting: GRADER_TRACE shows where it went)."""

from __future__ import annotations

import os
import time
from pathlib import Path


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
