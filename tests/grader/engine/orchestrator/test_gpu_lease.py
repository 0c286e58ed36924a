"""The GPU's lease: calls together, a timed window alone, timers first, no holder outliving its process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from grader.engine.orchestrator import gpu_lease
from grader.engine.orchestrator.gpu_lease import GpuLease, LeaseError

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture
def lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GpuLease:
    monkeypatch.setenv(gpu_lease.ENV, str(tmp_path / "locks"))
    return GpuLease("gpu-test")


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def add(self, what: str) -> None:
        with self.lock:
            self.events.append((time.monotonic(), what))

    def at(self, what: str) -> float:
        return next(t for t, w in self.events if w == what)


def hold(lease: GpuLease, log: Log, name: str, exclusive: bool, seconds: float, delay: float = 0.0) -> threading.Thread:
    def body() -> None:
        time.sleep(delay)
        log.add(f"{name} asks")
        with lease.exclusive() if exclusive else lease.shared():
            log.add(f"{name} in")
            time.sleep(seconds)
            log.add(f"{name} out")

    thread = threading.Thread(target=body)
    thread.start()
    return thread


def test_correctness_calls_share_the_gpu(lease: GpuLease) -> None:
    log = Log()
    threads = [hold(lease, log, f"call{i}", False, 0.3) for i in range(3)]
    for t in threads:
        t.join()
    ins = [log.at(f"call{i} in") for i in range(3)]
    outs = [log.at(f"call{i} out") for i in range(3)]
    assert max(ins) < min(outs)  # all three held it at once


def test_a_timed_window_waits_for_calls_in_flight_and_blocks_new_ones(lease: GpuLease) -> None:
    log = Log()
    threads = [
        hold(lease, log, "call", False, 0.4),
        hold(lease, log, "timer", True, 0.4, delay=0.1),
        hold(lease, log, "late call", False, 0.1, delay=0.2),
    ]
    for t in threads:
        t.join()
    assert log.at("timer in") >= log.at("call out")
    # writers first: the call that came after the timer asked waits for the whole window
    assert log.at("late call in") >= log.at("timer out")


def test_two_timers_never_overlap(lease: GpuLease) -> None:
    log = Log()
    threads = [hold(lease, log, f"timer{i}", True, 0.2) for i in range(2)]
    for t in threads:
        t.join()
    first, second = sorted(["timer0", "timer1"], key=lambda n: log.at(f"{n} in"))
    assert log.at(f"{second} in") >= log.at(f"{first} out")


def test_a_killed_holder_releases_the_gpu(lease: GpuLease, tmp_path: Path) -> None:
    code = (
        "import sys, time; from grader.engine.orchestrator.gpu_lease import GpuLease\n"
        "with GpuLease('gpu-test').exclusive():\n"
        "    print('held', flush=True); time.sleep(60)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        got = threading.Event()

        def take() -> None:
            with lease.shared():
                got.set()

        waiter = threading.Thread(target=take, daemon=True)
        waiter.start()
        assert not got.wait(0.3)  # held by the other process
        proc.send_signal(signal.SIGKILL)
        assert got.wait(10)  # the kernel dropped its lock with it
    finally:
        proc.kill()
        proc.wait()


def test_a_lock_folder_others_can_reach_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "open"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)
    monkeypatch.setenv(gpu_lease.ENV, str(folder))
    with pytest.raises(LeaseError, match="mode 0700"):
        gpu_lease.lock_folder()
    folder.chmod(0o700)
    assert gpu_lease.lock_folder() == folder


def test_no_lease_on_the_cpu() -> None:
    assert gpu_lease.for_device("cpu") is None


def _until(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_a_call_in_flight_sees_a_waiting_timer_and_steps_aside_for_it(lease: GpuLease) -> None:
    """A call that never ends (a hung submission) would hold every timer, and through the turnstile
    every other call, for its whole time limit: it sees the timer waiting, lets go, and queues behind it."""
    log = Log()
    with lease.shared() as call, lease.shared() as other:
        assert not call.writer_waiting() and not other.writer_waiting(), "calls that look never see each other"
        timer = hold(lease, log, "timer", True, 0.3)
        assert _until(call.writer_waiting), "the waiting timer is not seen"
        other_waited = threading.Thread(target=other.step_aside)
        other_waited.start()
        waited = call.step_aside()
        log.add("call back")
        other_waited.join()
        assert not call.writer_waiting(), "no timer waits once it is done"
    timer.join()
    assert log.at("timer in") < log.at("timer out") <= log.at("call back")
    assert waited >= 0.3


def test_a_timer_is_seen_only_while_it_waits(lease: GpuLease) -> None:
    log = Log()
    timer = hold(lease, log, "timer", True, 0.5)
    assert _until(lambda: bool(log.events) and log.events[-1][1] == "timer in")
    probe = gpu_lease.SharedHold(lease)  # a call's files, not yet holding: it would wait at the turnstile
    try:
        assert not probe.writer_waiting(), "a timer that has the GPU waits for no call"
    finally:
        probe.close()
    timer.join()


def test_a_call_steps_aside_only_after_its_grace(lease: GpuLease, monkeypatch: pytest.MonkeyPatch) -> None:
    """A short call ends before a timer stops it midway; past the grace its worker is stopped, the
    GPU let go, the worker resumed after the timer, and the wait told to the caller."""
    monkeypatch.setattr(gpu_lease, "STEP_ASIDE_AFTER_S", 0.5)
    log, told = Log(), []
    with lease.shared() as call:
        ask = call.waiting(lambda: log.add("worker stopped"), lambda: log.add("worker resumed"), told.append)
        timer = hold(lease, log, "timer", True, 0.2)
        assert _until(call.writer_waiting)
        assert ask() == 0.0 and not told, "within the grace the call keeps the GPU"
        time.sleep(0.5)
        waited = ask()
    timer.join()
    order = [w for _, w in log.events]
    assert order == ["timer asks", "worker stopped", "timer in", "timer out", "worker resumed"], order
    assert told == [waited] and waited >= 0.2


def test_the_grace_counts_from_the_hold_not_the_wait_for_it(lease: GpuLease, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call that waited behind a timer still gets its whole grace before it stops for the next one."""
    monkeypatch.setattr(gpu_lease, "STEP_ASIDE_AFTER_S", 0.5)
    log = Log()
    first = hold(lease, log, "first timer", True, 0.8)
    assert _until(lambda: bool(log.events) and log.events[-1][1] == "first timer in")
    with lease.shared() as call:  # waits about 0.8 s for the first timer
        second = hold(lease, log, "second timer", True, 0.1)
        assert _until(call.writer_waiting)
        ask = call.waiting(lambda: None, lambda: None, lambda seconds: None)
        assert ask() == 0.0, "a call that has just got the GPU keeps it through its grace"
    first.join()
    second.join()
