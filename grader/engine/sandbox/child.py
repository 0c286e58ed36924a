"""What the worker's process does between fork and exec: limits, its mount namespace, its user.

Everything is computed in the parent (`child_setup`) as strings and numbers, so that the child
only makes system calls: after a fork from a threaded process nothing else is safe.
"""

from __future__ import annotations

import ctypes
import os
import resource
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.engine.sandbox import seccomp
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.isolation import IsolationPlan
from grader.engine.sandbox.syscalls import (
    AT_FDCWD,
    AT_RECURSIVE,
    CLONE_NEWNS,
    MOUNT_ATTR_NOSUID,
    MOUNT_ATTR_RDONLY,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_NO_NEW_PRIVS,
    SYS_MOUNT_SETATTR,
    MountAttr,
    load_libc,
    mount,
)

_LIMIT_NAMES = {
    resource.RLIMIT_AS: "on address space (ulimit -v)",
    resource.RLIMIT_CPU: "on CPU time (ulimit -t)",
    resource.RLIMIT_FSIZE: "on file size (ulimit -f)",
    resource.RLIMIT_NPROC: "on processes (ulimit -u)",
}

# Workers of one submission may be started from several threads (problems checked at once):
# forking while another thread forks or sets up a namespace is kept out of the way.
SPAWN_LOCK = threading.Lock()


@dataclass
class ChildSetup:
    """Everything the child does before exec, computed in the parent (strings and numbers only)."""

    limits: list[tuple[int, int]]
    namespace: bool
    covers: list[tuple[str, list[str]]]
    hide: list[tuple[str, bool]]
    blocked_file: str
    #: (path, size in bytes) of each private, worker-owned tmpfs
    private_tmpfs: list[tuple[str, int]]
    tmpfs_bytes: int
    protect_proc: bool
    uid: int | None
    gid: int | None
    cwd: str
    #: install grader/engine/sandbox/seccomp.py's filter last (no namespaces, no mounts from here on)
    seccomp: bool = False


def child_setup(config: SandboxConfig, plan: IsolationPlan, scratch: Path) -> ChildSetup:
    """The setup of a worker whose private folder is `scratch` (grader/engine/sandbox/scratch.py)."""
    limits = [
        (resource.RLIMIT_CPU, config.cpu_seconds),
        (resource.RLIMIT_FSIZE, config.max_file_bytes),
        (resource.RLIMIT_CORE, 0),
    ]
    if config.memory_bytes and config.device == "cpu":
        limits.append((resource.RLIMIT_AS, config.memory_bytes))
    if plan.uid is not None:
        limits.append((resource.RLIMIT_NPROC, config.max_processes))
    for which, value in limits:
        hard = resource.getrlimit(which)[1]
        if hard != resource.RLIM_INFINITY and value > hard:
            # the worker would run with less than every grading gets (or not start): refuse here, as
            # the machine's fault, rather than let an honest submission fail (issue 29: `ulimit -v`)
            raise OSError(
                f"this grading process's hard limit {_LIMIT_NAMES.get(which, which)} is {hard}, below the "
                f"{value} a worker gets (a `ulimit` on the grader?): raise it or grade elsewhere"
            )
    namespace = plan.level == "namespace"
    keep = plan.keep + [scratch]
    covers = [(str(c), [str(k) for k in keep if c in k.parents]) for c in plan.covers]
    return ChildSetup(
        limits=limits,
        namespace=namespace,
        covers=covers,
        hide=[(str(p), p.is_dir()) for p in plan.hide],
        blocked_file=str(scratch / "stage" / "blocked"),
        private_tmpfs=[(str(scratch / "home"), config.home_tmpfs_bytes), (str(scratch / "tmp"), config.tmpfs_bytes)]
        if namespace
        else [],
        tmpfs_bytes=config.tmpfs_bytes,
        protect_proc=plan.protect_proc,
        uid=plan.uid,
        gid=plan.gid,
        cwd=str(scratch / "tmp"),
        seccomp=seccomp.available(),
    )


def _enter_namespace(setup: ChildSetup) -> None:
    """Runs in the child, as root, before it drops privileges. Raises if a required step fails."""
    libc = load_libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    blocked_fd = os.open(setup.blocked_file, os.O_PATH | os.O_CLOEXEC)
    # everything read-only (Linux 5.12+); later tmpfs mounts are writable. Older kernels: skipped.
    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    small = f"size={min(setup.tmpfs_bytes, 64 << 20)}"
    for cover, keeps in setup.covers:
        if not os.path.isdir(cover):
            continue
        held = [(os.open(k, os.O_PATH | os.O_CLOEXEC), k) for k in keeps if os.path.isdir(k)]
        mode = "1777" if cover in ("/tmp", "/var/tmp", "/dev/shm") else "0755"
        mount(libc, "tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},{small}")
        for fd, keep in held:
            os.makedirs(keep, exist_ok=True)
            mount(libc, f"/proc/self/fd/{fd}", keep, None, MS_BIND | MS_REC, None)
            os.close(fd)
    for path, is_dir in setup.hide:
        if not os.path.lexists(path):  # already out of sight under a cover
            continue
        if is_dir:
            mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k")
        else:
            mount(libc, f"/proc/self/fd/{blocked_fd}", path, None, MS_BIND, None)
    os.close(blocked_fd)
    for path, size in setup.private_tmpfs:
        mount(
            libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,uid={setup.uid},gid={setup.gid},size={size}"
        )
    if setup.protect_proc:
        try:
            mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
        except OSError:
            pass  # e.g. a container whose /proc has masked paths: processes stay visible (documented)
    # the working directory was entered before the mounts: enter it again, on its private tmpfs
    os.chdir(setup.cwd)


def preexec(setup: ChildSetup) -> Callable[[], None]:
    def run() -> None:
        for which, value in setup.limits:
            resource.setrlimit(which, (value, value))
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # under memory pressure the kernel kills a worker, not the grader
        except OSError:
            pass
        if setup.namespace:
            _enter_namespace(setup)
        load_libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if setup.uid is not None:
            os.setgroups([])
            os.setresgid(setup.gid, setup.gid, setup.gid)  # type: ignore[arg-type]
            os.setresuid(setup.uid, setup.uid, setup.uid)
        if setup.seccomp:
            seccomp.worker_filter().install()  # raises: the spawn fails rather than run unfiltered

    return run
