"""Waiting for a worker's reply in slices, so that a timer waiting for the GPU is seen meanwhile."""

from __future__ import annotations

import select
import time
from collections.abc import Callable

#: how often a call that waits for its reply asks its `waiting` callback (a timer's wait at most)
WAIT_SLICE_S = 0.1


def await_reply(fd: int, deadline: float, waiting: Callable[[], float]) -> float:
    """Wait for the reply's first byte in slices, asking `waiting` between them; the deadline, pushed
    back by what `waiting` returned. At the deadline the reply is read anyway, which times it out."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return deadline
        try:
            ready, _, _ = select.select([fd], [], [], min(left, WAIT_SLICE_S))
        except (OSError, ValueError):
            return deadline  # the read that follows says what is wrong with the channel
        if ready:
            return deadline
        deadline += waiting()
