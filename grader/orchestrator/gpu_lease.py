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
  a timer, and a waiting timer is served before any call that arrives after it.

The files live in a folder of the grader's own uid, mode 0700 (`GRADER_GPU_LOCKS`, default a
folder under the system's temp dir): a worker, which runs as another uid, cannot open them, so
it can neither hold the GPU nor release someone else's hold. A worker between calls is stopped
(SIGSTOP, grader/orchestrator/problem_run.py), so what it left running cannot share a window.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENV = "GRADER_GPU_LOCKS"


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

    def _open(self, path: Path) -> int:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the GPU beside other correctness calls; waits while a timed window is open or wanted."""
        gate, main = self._open(self.turnstile), self._open(self.main)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            try:
                fcntl.flock(main, fcntl.LOCK_SH)
            finally:
                fcntl.flock(gate, fcntl.LOCK_UN)
            yield
        finally:
            os.close(main)  # closing drops the hold
            os.close(gate)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the GPU alone: every call in flight ends first, and none starts until this one closes."""
        gate, main = self._open(self.turnstile), self._open(self.main)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(main, fcntl.LOCK_EX)
            yield
        finally:
            os.close(main)
            os.close(gate)


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
