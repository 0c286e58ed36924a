"""The timing method, shared by `pytest handout --benchmark-only` and the grader.

- A GPU-correct clock (`CudaClock`): CUDA events recorded on the stream, so the time between two
  readings is GPU time, not the time it took the CPU to queue the launches; rounds are queued
  back to back and read once they are done.
- Launch latency kept out (`LaunchCover`): before each chunk of rounds the GPU is given a short
  sleep to run while the CPU queues the chunk, so no round waits for the CPU; the sleep is sized
  to what the CPU would fall behind, no more (an idle GPU clocks higher afterwards). Without it a kernel
  shorter than the CPU's launch path is timed with part of that path inside (a busy orchestrator
  measured a 37 µs kernel at 55 µs), and the two sides of a comparison would differ by whatever
  else their processes were doing.
- Warm-up excluded: compilation, autotuning and first-touch allocations happen before timing.
- L2 flushed before every round (a write over twice the L2's size), so a kernel re-reading an
  input that the previous round left in cache is not rewarded.
- Inputs rotated between rounds: round i uses input set i mod n, so nothing can serve a result
  cached from the previous round; with `RoundHooks` (the grader, the handout) each round's set
  also gets new contents before the round, and a sample of rounds has its outputs kept to check.
- Rounds until the relative standard error of the mean is below the target, or a time budget is
  spent: a pilot of rounds estimates the spread and plans how many more are needed.
- Median and interquartile range reported (pytest-benchmark's own statistics).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from pytest_benchmark.stats import Stats

PILOT_ROUNDS = 10
MIN_ROUNDS = 10
#: the fewest rounds a measurement of a slow kernel takes (its pilot and its minimum shrink to fit
#: the budget: ten rounds of a 150 ms step were 1.5 s of a 0.25 s window)
FEWEST_ROUNDS = 3
MAX_ROUNDS = 1000
TARGET_RSE = 0.005
WARMUP_S = 0.05


class CudaStamp:
    """A CUDA event recorded on the current stream; subtracting two gives the GPU time between them.

    Nothing synchronises when a stamp is taken, so the CPU queues rounds ahead of the GPU and
    launch overhead hides behind the previous round's L2 flush (as in triton.testing.do_bench);
    the subtraction waits for the later event only when the number is needed.
    """

    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = torch.cuda.Event(enable_timing=True)
        self.event.record()

    def __sub__(self, earlier: CudaStamp) -> float:
        self.event.synchronize()
        return earlier.event.elapsed_time(self.event) / 1e3


class CudaClock:
    """A pytest-benchmark `timer` for asynchronous GPU work: returns CudaStamps, which subtract to seconds."""

    def __call__(self) -> CudaStamp:
        return CudaStamp()


class L2Flusher:
    """Overwrites a buffer twice the size of the L2 cache, evicting whatever the last round left."""

    def __init__(self) -> None:
        self.buffer = torch.empty(self.size(), dtype=torch.int8, device="cuda")

    @staticmethod
    def size() -> int:
        """The buffer's bytes: a timed window's own allocation beside the calls it times."""
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return 2 * (getattr(props, "L2_cache_size", 0) or (64 << 20))

    def __call__(self) -> None:
        self.buffer.zero_()


@dataclass
class Measurement:
    samples_s: list[float]
    #: rounds the hooks saw: the samples' and any watched chunk's (ChunkWatch)
    rounds_run: int = 0
    #: the host's seconds in the warm-up (compiles, autotuning, the first calls), if one was run
    warm_s: float = 0.0

    @property
    def stats(self) -> Stats:
        stats = Stats()
        for s in self.samples_s:
            stats.update(s)
        return stats

    @property
    def median_ms(self) -> float:
        return self.stats.median * 1e3

    @property
    def iqr_ms(self) -> float:
        return self.stats.iqr * 1e3 if len(self.samples_s) > 1 else 0.0


def relative_standard_error(samples: list[float]) -> float:
    n = len(samples)
    if n < 2:
        return math.inf
    mean = sum(samples) / n
    var = sum((s - mean) ** 2 for s in samples) / (n - 1)
    return math.sqrt(var / n) / mean if mean > 0 else math.inf


def pilot_rounds(expect_s: float | None, budget_s: float) -> int:
    """How many rounds the pilot takes: PILOT_ROUNDS, fewer (down to FEWEST_ROUNDS) when that many
    rounds of a call expected to take `expect_s` would overrun the budget."""
    if expect_s is None or not expect_s > 0:
        return PILOT_ROUNDS
    return max(FEWEST_ROUNDS, min(PILOT_ROUNDS, math.ceil(budget_s / expect_s)))


def plan_rounds(
    pilot: list[float],
    budget_s: float,
    target_rse: float = TARGET_RSE,
    min_s: float = 0.0,
    min_rounds: int = MIN_ROUNDS,
) -> int:
    """Rounds needed for the target RSE, from the pilot's spread, within the time budget.

    `min_s` asks for at least that much timed work however steady the pilot looked: a GPU's
    clocks under a heavy load drift over tens of milliseconds, more than ten rounds may cover.
    """
    mean = sum(pilot) / len(pilot)
    cv = relative_standard_error(pilot) * math.sqrt(len(pilot))
    wanted = math.ceil((cv / target_rse) ** 2) if math.isfinite(cv) else MAX_ROUNDS
    wanted = max(wanted, math.ceil(min_s / max(mean, 1e-7)))
    affordable = int(budget_s / max(mean, 1e-7))
    return max(min_rounds, min(wanted, affordable, MAX_ROUNDS))


def warm_up(calls: list[Callable[[], Any]]) -> float:
    """Run every input set once, then keep going until WARMUP_S has passed (compile, autotune).

    Returns the seconds one warm call took, launch and synchronisation included (an upper bound
    on its GPU time, which is what sizing a pilot needs)."""
    for call in calls:
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    i = 0
    while time.perf_counter() - start < WARMUP_S:
        calls[i % len(calls)]()
        torch.cuda.synchronize()
        i += 1
    return (time.perf_counter() - start) / max(i, 1)


class LaunchCover:
    """Queues a GPU sleep just long enough for the CPU to stay ahead of the chunk of rounds behind it.

    The CPU falls behind only when queueing a round takes longer than the GPU takes to run it, and
    only by the difference, so the sleep covers the first launch plus that shortfall: a 37 µs
    a 37 µs kernel gets milliseconds of cover, a 4 ms step almost none. A longer sleep would
    not change what is timed inside a round, but an idle GPU near its power limit clocks higher
    afterwards, and compute-bound kernels would be timed a few percent fast.
    The sleep counts clock cycles (`torch.cuda._sleep`); cycles per second, the CPU's time per
    round and the GPU's are learnt from each chunk, so the cover follows clocks and callers.
    """

    MAX_HOLD_S = 0.03
    MAX_CHUNK = 100  # rounds per chunk: about 4 launches each stays well inside the launch queue

    def __init__(self) -> None:
        self.cycles_per_s = 2.0e9  # an upper guess: a lower clock only makes the first sleep longer
        self.host_per_round_s = 2e-4
        self.gpu_per_round_s = 0.0

    @property
    def shortfall_s(self) -> float:
        """How much further behind the GPU the CPU falls with each round it queues."""
        return max(self.host_per_round_s - self.gpu_per_round_s, 0.0)

    @property
    def chunk(self) -> int:
        if self.shortfall_s == 0.0:
            return self.MAX_CHUNK
        return max(1, min(self.MAX_CHUNK, int(self.MAX_HOLD_S / 1.5 / self.shortfall_s)))

    def hold(self, rounds: int) -> tuple[CudaStamp, CudaStamp, int]:
        seconds = min(self.MAX_HOLD_S, 1.5 * (self.host_per_round_s + rounds * self.shortfall_s) + 2e-4)
        cycles = int(seconds * self.cycles_per_s)
        before = CudaStamp()
        torch.cuda._sleep(cycles)
        return before, CudaStamp(), cycles

    def learn(self, rounds: int, host_s: float, held: tuple[CudaStamp, CudaStamp, int], samples: list[float]) -> None:
        before, after, cycles = held
        slept = after - before
        if slept > 0:
            self.cycles_per_s = cycles / slept
        self.host_per_round_s = max(host_s / rounds, 1e-6)
        # the timed part of a round only: its L2 flush is GPU time too, so the CPU's real lead is larger
        self.gpu_per_round_s = sum(samples) / len(samples) if samples else 0.0


# One per process: what it learns about the clock and the caller carries over between measurements.
COVER = LaunchCover()


class ChunkWatch(Protocol):
    """Runs some chunks of rounds a second time, whole, under a profiler (`grader.engine.harness.timed_watch`).

    A watched chunk is an extra one, queued like the rest and with the same hooks around its
    rounds, so nothing in a call tells it apart; its samples are not kept (the profiler's own cost
    is not the kernel's). `pick` is asked before every chunk."""

    def pick(self, index: int, rounds: int) -> tuple[list[Callable[[], Any]], int] | None:
        """Before the chunk of `rounds` starting at this measurement's round `index`: the calls to
        watch a chunk with and its rounds, or None."""

    def watching(self, rounds: int) -> AbstractContextManager[None]:
        """Around the watched chunk of `rounds`, its launch cover included (it synchronises at the end)."""


class RoundHooks(Protocol):
    """Work around each timed round, outside its events: it must queue GPU work only (no sync)."""

    def before(self, input_set: int) -> None:
        """Before the L2 flush of a round that will use `input_set`."""

    def after(self, result: Any, chunk_end: bool) -> None:
        """After the round's closing event, with what the call returned."""


def run_rounds(
    calls: list[Callable[[], Any]],
    rounds: int,
    clock: CudaClock,
    flush: L2Flusher,
    offset: int = 0,
    hooks: RoundHooks | None = None,
    watch: ChunkWatch | None = None,
    deadline: float | None = None,
) -> tuple[list[float], int]:
    """`rounds` timed calls, each after an L2 flush, queued in chunks behind a LaunchCover; no
    chunk starts past `deadline` (a `time.perf_counter()` value) once one has run.

    Returns the samples and the rounds run, watched chunks' rounds included (the hooks saw them all)."""
    cover = COVER
    samples: list[float] = []
    done = extra = 0
    while done < rounds:
        if done and deadline is not None and time.perf_counter() > deadline:
            break
        n = min(cover.chunk, rounds - done)
        picked = watch.pick(offset + done, n) if watch is not None else None
        if picked is not None and watch is not None:
            watched_calls, m = picked
            with watch.watching(m):
                _chunk(watched_calls, m, offset + done, clock, flush, hooks, cover)
            extra += m
        chunk, host_s, held = _chunk(calls, n, offset + done, clock, flush, hooks, cover)
        cover.learn(n, host_s, held, chunk)
        samples += chunk
        done += n
    return samples, done + extra


def _chunk(
    calls: list[Callable[[], Any]],
    n: int,
    first: int,
    clock: CudaClock,
    flush: L2Flusher,
    hooks: RoundHooks | None,
    cover: LaunchCover,
) -> tuple[list[float], float, tuple[CudaStamp, CudaStamp, int]]:
    """One chunk of `n` rounds behind the cover: (its samples, the CPU's time to queue it, the hold)."""
    held = cover.hold(n)
    host_start = time.perf_counter()
    stamps = []
    for i in range(n):
        which = (first + i) % len(calls)
        if hooks is not None:
            hooks.before(which)
        flush()
        start = clock()
        result = calls[which]()
        stamps.append((start, clock()))
        if hooks is not None:
            hooks.after(result, i == n - 1)
        result = None
    host_s = time.perf_counter() - host_start
    return [end - start for start, end in stamps], host_s, held


def measure(
    calls: list[Callable[[], Any]],
    budget_s: float = 1.0,
    warm: bool = True,
    min_s: float = 0.0,
    hooks: RoundHooks | None = None,
    expect_s: float | None = None,
    watch: ChunkWatch | None = None,
    max_wall_s: float | None = None,
) -> Measurement:
    """Warm up, run a pilot, then as many rounds as the pilot says the target RSE needs.

    `expect_s` is what one call is expected to take (an earlier measurement's median; the warm-up's
    own estimate when warming up): a slow kernel's pilot and minimum shrink to fit `budget_s`.
    `max_wall_s` bounds the host's time after the warm-up: the budget counts timed work only, and
    a call whose host side dwarfs its GPU time (a sync per call, Python between launches) once
    held the GPU eight times longer than its budget (docs/gpu-scheduling.md)."""
    clock, flush = CudaClock(), L2Flusher()
    warming = time.perf_counter()
    if warm:
        expect_s = warm_up(calls)
    warm_s = time.perf_counter() - warming
    deadline = None if max_wall_s is None else time.perf_counter() + max_wall_s
    pilot = pilot_rounds(expect_s, budget_s)
    samples, run = run_rounds(calls, pilot, clock, flush, hooks=hooks, watch=watch, deadline=deadline)
    rounds = plan_rounds(samples, budget_s, min_s=min_s, min_rounds=pilot)
    if deadline is not None and time.perf_counter() > deadline:
        rounds = len(samples)
    more, run_more = run_rounds(
        calls,
        max(rounds - len(samples), 0),
        clock,
        flush,
        offset=len(samples),
        hooks=hooks,
        watch=watch,
        deadline=deadline,
    )
    return Measurement(samples + more, run + run_more, warm_s)


def loop_wall_time(call: Callable[[], Any], rounds: int) -> float:
    """Host wall time of `rounds` back-to-back calls, ending with a device-wide synchronise.

    Work left running on a side stream is included here, whatever the events recorded.
    """
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(rounds):
        call()
    torch.cuda.synchronize()
    return time.perf_counter() - start
