"""A worker's waits for a CPU held by others are excused from its problem's clock; its own are not.

Real processes pinned to one CPU: a busy worker beside a busy neighbour waits for the CPU about
half the time (excused); a worker whose own second thread crowds it out uses the CPU the whole time
(nothing excused); a sleeping worker waits for nothing (its sleep is charged)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from grader.engine.orchestrator.problem_clock import ProblemClock
from grader.engine.sandbox import cpu_wait

pytestmark = pytest.mark.skipif(
    cpu_wait.sample(os.getpid()) is None or not hasattr(os, "sched_setaffinity"),
    reason="this kernel gives no scheduler statistics (/proc/<pid>/schedstat)",
)

BUSY = "import time\nwhile True:\n    sum(range(10000))\n"
# hashlib lets go of the GIL over large inputs: two threads really run at once
CROWDED = (
    "import hashlib, threading\nblob = b'x' * (1 << 22)\n"
    "def spin():\n    while True:\n        hashlib.sha256(blob)\n"
    "threading.Thread(target=spin, daemon=True).start()\nspin()\n"
)
SLEEPY = "import time\ntime.sleep(60)\n"
CPU = min(os.sched_getaffinity(0))


@contextmanager
def _on_one_cpu(source: str) -> Iterator[int]:
    proc = subprocess.Popen([sys.executable, "-c", source])
    try:
        os.sched_setaffinity(proc.pid, {CPU})
        time.sleep(0.3)  # its interpreter started
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _charged(pid: int, seconds: float) -> tuple[ProblemClock, float]:
    clock = ProblemClock(100.0)
    clock.pid = pid
    with clock.charging("case a"):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.1)
            clock.starved()  # as a call's wait for its reply asks
    return clock, clock.spent["case a"]


def test_a_worker_beside_a_busy_neighbour_is_charged_its_cpu_time_only() -> None:
    with _on_one_cpu(BUSY) as neighbour, _on_one_cpu(BUSY) as worker:
        assert neighbour != worker
        clock, charged = _charged(worker, 3.0)
    assert 1.0 < charged < 2.2, charged  # about half of 3 s; the other half was the neighbour's
    assert clock.cpu_excused == pytest.approx(3.0 - charged, abs=0.2)
    assert "waiting for a CPU others held was not charged" in clock.account()


def test_a_worker_that_crowds_itself_is_charged_the_wall_time() -> None:
    with _on_one_cpu(CROWDED) as worker:
        first = cpu_wait.sample(worker)
        clock, charged = _charged(worker, 3.0)
        now = cpu_wait.sample(worker)
    assert first is not None and now is not None
    assert now.waited - first.waited > 0.8  # its main thread did wait: for its own second thread
    assert charged > 2.7 and clock.cpu_excused < 0.3, (charged, clock.cpu_excused)


def test_a_sleeping_worker_is_charged_its_sleep() -> None:
    with _on_one_cpu(BUSY), _on_one_cpu(SLEEPY) as worker:
        clock, charged = _charged(worker, 2.0)
    assert charged > 1.9 and clock.cpu_excused < 0.05


def test_what_is_excused_stops_at_the_problems_limit() -> None:
    with _on_one_cpu(BUSY), _on_one_cpu(BUSY) as worker:
        clock = ProblemClock(0.5)
        clock.pid = worker
        with clock.charging("case a"):
            time.sleep(2.0)
    assert clock.cpu_excused == pytest.approx(0.5)
    assert clock.spent["case a"] > 1.4


def test_a_gone_process_excuses_nothing() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert cpu_wait.sample(proc.pid) is None
    clock = ProblemClock(10.0)
    clock.pid = proc.pid
    with clock.charging("case a"):
        time.sleep(0.1)
    assert clock.cpu_excused == 0 and clock.spent["case a"] >= 0.1
