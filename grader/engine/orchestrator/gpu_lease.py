"""One GPU shared by a class: correctness calls at once, timed windows alone.

Several gradings (threads of one `grader grade`, `grader batch --jobs` children, Ray or Slurm
tasks on one node) share a GPU. Their correctness calls are milliseconds of GPU work between
seconds of CPU work (worker start-up, Triton compiles), so they may overlap; a timed window may
not overlap anything, or one student's ratio would depend on who else was being graded.

The lease is a reader-writer lock on two files per GPU (flock, so it spans processes and is
dropped by the kernel when a holder dies, however it dies):

- a correctness call holds the GPU *shared* (`shared()`): any number at once;
- a timed window holds it *exclusive* (`exclusive()`): it waits for the calls in flight to end,
  and no call starts until the window closes;
- writers first: a timer takes the `turnstile` file before waiting, and a call passes through
  the turnstile before it takes its shared hold, so a stream of correctness calls cannot starve
  a timer, and a waiting timer is served before any call that arrives after it;
- a long call steps aside: while a timer waits it holds the `wanted` file, which a call
  in flight can see (`SharedHold.writer_waiting`); one that has run past `STEP_ASIDE_AFTER_S`
  (a first call's compile, a submission's endless loop) stops its worker and lets go
  (`SharedHold.step_aside`), then queues behind the timer. Without it one hung call held every
  timer, and through the turnstile every other grading, for its problem's whole time limit
  (the bundled `broken` example stalled a class on the H200 for minutes).

The files live in a folder of the grader's own uid, mode 0700 (`GRADER_GPU_LOCKS`, default a
folder under the system's temp dir): a worker, which runs as another uid, cannot open them, so
it can neither hold the GPU nor release someone else's hold. A worker between calls is stopped
(SIGSTOP, grader/engine/orchestrator/problem_run.py), so what it left running cannot share a window.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from grader.engine.orchestrator import trace

ENV = "GRADER_GPU_LOCKS"
#: how long a correctness call keeps the GPU from a waiting timer before it steps aside: most calls
#: end well within it, so a timer rarely stops one midway, and none waits much longer than this
STEP_ASIDE_AFTER_S = 2.0


class LeaseError(RuntimeError):
    """The lock folder is not the grader's own: grading would not be exclusive."""


def lock_folder() -> Path:
    """$GRADER_GPU_LOCKS, else <tmp>/grader-gpu-locks-<uid>; made 0700 and checked to be ours."""
    folder = Path(os.environ.get(ENV) or Path(tempfile.gettempdir()) / f"grader-gpu-locks-{os.geteuid()}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise LeaseError(
            f"{folder} must be a folder owned by uid {os.geteuid()} with mode 0700 (it holds the GPU's "
            f"timing lease; another user could hold the GPU through it): remove it or set ${ENV}"
        )
    return folder


class GpuLease:
    """The shared/exclusive lease of one GPU, named by its UUID (the same GPU under any index)."""

    def __init__(self, key: str, folder: Path | None = None) -> None:
        folder = folder if folder is not None else lock_folder()
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:120]
        self.main = folder / f"{safe}.lock"
        self.turnstile = folder / f"{safe}.turnstile"
        self.wanted = folder / f"{safe}.wanted"

    @contextmanager
    def shared(self) -> Iterator[SharedHold]:
        """Hold the GPU beside other correctness calls; waits while a timed window is open or wanted."""
        hold = SharedHold(self)
        try:
            hold.take()
            hold.since = time.monotonic()  # the grace counts from the hold, not from the wait for it
            yield hold
        finally:
            hold.close()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the GPU alone: every call in flight ends (or steps aside) first, and none starts until
        this one closes."""
        wanted, gate, main = _open(self.wanted), _open(self.turnstile), _open(self.main)
        try:
            fcntl.flock(wanted, fcntl.LOCK_EX)  # seen by the calls in flight while this waits
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(main, fcntl.LOCK_EX)
            fcntl.flock(wanted, fcntl.LOCK_UN)  # no call holds the GPU now: nothing to ask of them
            yield
        finally:
            os.close(main)
            os.close(gate)
            os.close(wanted)


class SharedHold:
    """One correctness call's shared hold, which can see a waiting timer and step aside for it."""

    def __init__(self, lease: GpuLease) -> None:
        self.since = time.monotonic()  # set again once the hold is taken
        self.gate = _open(lease.turnstile)
        self.main = _open(lease.main)
        self.probe = _open(lease.wanted)

    def take(self) -> None:
        """Through the turnstile (behind any timer waiting there), then the shared hold."""
        fcntl.flock(self.gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.main, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.gate, fcntl.LOCK_UN)

    def writer_waiting(self) -> bool:
        """Whether a timer waits for the GPU (it holds `wanted` until it has the GPU; calls that look
        share the file, so they never see each other)."""
        try:
            fcntl.flock(self.probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self.probe, fcntl.LOCK_UN)
        return False

    def step_aside(self) -> float:
        """Let go of the GPU, then take it again behind the waiting timer(s); the seconds it took.

        The caller stops its worker first: nothing of this call may run in the timer's window.
        """
        fcntl.flock(self.main, fcntl.LOCK_UN)
        asked = time.monotonic()
        self.take()
        return time.monotonic() - asked

    def waiting(
        self, stop: Callable[[], None], go_on: Callable[[], None], waited: Callable[[float], None]
    ) -> Callable[[], float]:
        """What a call asks while it waits for its worker: once it has held the GPU
        `STEP_ASIDE_AFTER_S` and a timer waits, `stop` its worker, step aside, `go_on`; the seconds
        that took (told to `waited` too), else 0."""

        def ask() -> float:
            if time.monotonic() - self.since < STEP_ASIDE_AFTER_S or not self.writer_waiting():
                return 0.0
            stop()
            try:
                with trace.span("the GPU's lease", "a call stepped aside for a timer"):
                    seconds = self.step_aside()
            finally:
                go_on()
            waited(seconds)
            return seconds

        return ask

    def close(self) -> None:
        for fd in (self.main, self.gate, self.probe):
            os.close(fd)  # closing drops the hold


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)


_LEASES: dict[str, GpuLease] = {}


def for_device(device: str) -> GpuLease | None:
    """This process's lease of the current CUDA device; None on the CPU (nothing to share)."""
    if device != "cuda":
        return None
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    key = str(getattr(props, "uuid", "") or f"{props.name}-{torch.cuda.current_device()}")
    if key not in _LEASES:
        _LEASES[key] = GpuLease(f"gpu-{key}")
    return _LEASES[key]
