"""Copying a worker's Triton cache out with the worker's own credentials, never root's.

Root never opens a path in the worker's cache: `tar`, started as the worker's uid, in the worker's
own mount namespace (setns) and under the same seccomp filter, reads it without following links
or leaving its file system, and streams it to kernel_cache.receive, which keeps only Triton's own
kinds of file within the caps. So the cache can only hold what the worker could read itself,
whatever it mounted or linked.
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

from grader import kernel_cache
from grader.sandbox import seccomp
from grader.sandbox.child import SPAWN_LOCK
from grader.sandbox.plan import IsolationPlan
from grader.sandbox.syscalls import CLONE_NEWNS, PR_SET_NO_NEW_PRIVS, load_libc

HELPER_LIMIT_S = 60  # how long the helper that streams a worker's Triton cache may take


def _as_worker(ns_fd: int, uid: int | None, gid: int | None, filtered: bool) -> Callable[[], None]:
    """Pre-exec of a helper that must act with the worker's credentials alone (save_kernel_cache):
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


def copy_out(pid: int, plan: IsolationPlan, home: Path, dest: Path) -> kernel_cache.Copied | None:
    """Keep the Triton files of `home`/.triton of the (paused) worker `pid` in `dest`; None on failure.

    The least recently used slots are evicted afterwards to keep the whole cache under its cap.
    """
    tar = shutil.which("tar", path="/usr/bin:/bin")
    if tar is None:
        return None
    argv = [tar, "--create", "--file=-", "--one-file-system", "--numeric-owner", f"--directory={home}", ".triton"]
    ns_fd = -1
    try:
        if plan.level == "namespace":
            ns_fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
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
    finally:
        if ns_fd >= 0:
            os.close(ns_fd)
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
