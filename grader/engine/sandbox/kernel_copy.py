"""Copying a worker's Triton cache out with the worker's own credentials, never root's.

Root never opens a path in the worker's cache: `tar`, started as the worker's uid, in the worker's
own mount namespace (setns) and under the same seccomp filter, reads it without following links
or leaving its file system, and streams it to kernel_cache.receive, which keeps only Triton's own
kinds of file within the caps. So the cache can only hold what the worker could read itself,
whatever it mounted or linked.

The copy is made after the worker has ended (`HeldCache`), so it never holds the GPU alone: on
the H200 the timing window closed 0.06-0.12 s later per problem for the copy, and a cache flooded
with files could hold it, and so every other grading, for the helper's whole limit.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from grader.engine import kernel_cache
from grader.engine.sandbox import seccomp
from grader.engine.sandbox.child import SPAWN_LOCK
from grader.engine.sandbox.isolation import IsolationPlan
from grader.engine.sandbox.syscalls import CLONE_NEWNS, PR_SET_NO_NEW_PRIVS, load_libc

HELPER_LIMIT_S = 60  # how long the helper that streams a worker's Triton cache may take


def _as_worker(ns_fd: int, uid: int | None, gid: int | None, filtered: bool) -> Callable[[], None]:
    """Pre-exec of a helper that must act with the worker's credentials alone (HeldCache.copy):
    its mount namespace (when `ns_fd` >= 0), its uid and gid, no_new_privs and the seccomp filter."""

    def run() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (HELPER_LIMIT_S, HELPER_LIMIT_S))
        libc = load_libc()
        if ns_fd >= 0 and libc.setns(ns_fd, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns into the worker's mount namespace")
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if uid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)  # type: ignore[arg-type]
            os.setresuid(uid, uid, uid)
        if filtered:
            seccomp.worker_filter().install()

    return run


class HeldCache:
    """A stopped worker's Triton cache, kept readable until it is copied: its mount namespace (an
    open descriptor keeps it, with the private tmpfs that holds the files, after the worker's
    processes have ended), and, until `release`, its scratch folder and its uid (not leased to
    another worker while a helper acts as it)."""

    def __init__(self, pid: int, plan: IsolationPlan, home: Path, release: Callable[[], None]) -> None:
        """Raises OSError when the worker `pid` is gone already."""
        self.plan, self.home, self._release = plan, home, release
        self.ns_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC) if plan.level == "namespace" else -1

    def copy(self, dest: Path) -> kernel_cache.Copied | None:
        """Keep the Triton files of the worker's `home`/.triton in `dest`, then `release`; None on
        failure. The least recently used slots are evicted to keep the whole cache under its cap."""
        try:
            return _copy_out(self.ns_fd, self.plan, self.home, dest)
        finally:
            self.release()

    def release(self) -> None:
        """The namespace let go, the scratch folder removed, the uid free again; once."""
        if self.ns_fd >= 0:
            os.close(self.ns_fd)
            self.ns_fd = -1
        release, self._release = self._release, lambda: None
        release()


def _copy_out(ns_fd: int, plan: IsolationPlan, home: Path, dest: Path) -> kernel_cache.Copied | None:
    tar = shutil.which("tar", path="/usr/bin:/bin")
    if tar is None or (plan.level == "namespace" and ns_fd < 0):
        return None
    argv = [tar, "--create", "--file=-", "--one-file-system", "--numeric-owner", f"--directory={home}", ".triton"]
    try:
        load_libc()
        with SPAWN_LOCK:
            helper = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"},
                cwd="/",
                start_new_session=True,
                preexec_fn=_as_worker(ns_fd, plan.uid, plan.gid, seccomp.available()),
            )
    except (OSError, subprocess.SubprocessError):
        return None
    watchdog = threading.Timer(HELPER_LIMIT_S, helper.kill)
    watchdog.daemon = True
    watchdog.start()
    try:
        assert helper.stdout is not None
        kept = kernel_cache.keep(lambda folder: kernel_cache.receive(helper.stdout, folder), dest)  # type: ignore[arg-type]
    except OSError:
        return None
    finally:
        watchdog.cancel()
        helper.kill()
        helper.wait()
        helper.stdout.close()  # type: ignore[union-attr]
    kernel_cache.evict(kernel_cache.root_of(dest))
    return kept
