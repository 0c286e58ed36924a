"""Timed rounds held to the kernel rule as correctness calls are: a chunk of a window, run whole
under the profiler.

Correctness watches every call; timing cannot (the profiler's cost is not the kernel's), so a
submission could run its Triton kernel while watched and PyTorch's once the timed rounds pile
up, launching a token Triton kernel beside it to satisfy the launch count. So before a round
drawn from the secret (`TimeRequest.watch_round`), the worker runs one extra chunk of rounds
with the profiler on: queued like every other chunk, behind the same launch cover, with the same
refills and samples around each round, so nothing a call can see tells it apart. Each of its
calls runs inside a profiler range (`RANGE`), and only the ops that start inside one are the
submission's: the harness's refills and flushes between rounds are not. Its samples are not kept.

The orchestrator judges what was seen with the kernel rule's own wording
(`grader.engine.judge.performance.watched_flags`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from grader.engine import protocol, timing
from grader.engine.harness.calls import profiled
from grader.engine.harness.timed_rounds import FreshRounds

#: the profiler range around each call of a watched chunk
RANGE = "grader: timed call"
#: a watched chunk's rounds take about this much GPU time at most (one round at least: a 150 ms
#: attention step is watched once, not three times)
WATCHED_S = 0.03
# bound at import, as the harness's other profiler entry points are (the guard keeps the name)
_record_function = torch.autograd.profiler.record_function


def ranged(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn`, each call inside a profiler range named RANGE (which costs nothing while no profiler runs)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        with _record_function(RANGE):
            return fn(*args, **kwargs)

    return call


class ChunkProfiler:
    """`timing.ChunkWatch` for one timed window of the worker: one watched chunk, before `at`."""

    def __init__(
        self, calls: list[Callable[[], Any]], at: int | None, rounds: FreshRounds | None, device: str = "cuda"
    ) -> None:
        self.calls, self.at, self.rounds, self.device = calls, at, rounds, device
        self.watched: list[protocol.WatchedChunk] = []
        self.spent_s = 0.0  # the host's time in watched chunks, the profiler's start and stop included

    def pick(self, index: int, rounds: int) -> tuple[list[Callable[[], Any]], int] | None:
        if self.at is None or not index <= self.at < index + rounds:
            return None
        self.at = None
        per_round = max(timing.COVER.gpu_per_round_s, 1e-6)
        return self.calls, max(1, min(rounds, int(WATCHED_S / per_round)))

    @contextmanager
    def watching(self, rounds: int) -> Iterator[None]:
        first = self.rounds.index if self.rounds is not None else 0
        record: dict[str, Any] = {}
        started = time.perf_counter()
        with profiled(record, self.device, within=RANGE):
            yield
        self.spent_s += time.perf_counter() - started
        seen = {k: v for k, v in record.items() if k != "gpu_kernels"}  # the harness's kernels are in there too
        self.watched.append(protocol.WatchedChunk(**seen, first_round=first, rounds=rounds))
