"""A seccomp filter that keeps a worker from making namespaces or mounts.

Why: a worker that may create a user namespace (unprivileged user namespaces are on by default
on Debian and RHEL kernels) becomes "root" there and can mount: bind a folder over its Triton
cache, pivot its root, and so on. Anything the trusted side later reads through those paths is
then chosen by the submission (issue 17: a root-only file was printed into a report that way).
A submission has no use for namespaces or mounts, so the worker is denied them outright:

- unshare, setns, mount, umount2, pivot_root, chroot and the new mount API (open_tree,
  move_mount, fsopen, fsconfig, fsmount, fspick, mount_setattr, open_tree_attr): EPERM;
- clone with any CLONE_NEW* flag: EPERM (threads, fork and vfork carry none);
- clone3: ENOSYS. Its flags sit in a struct that a filter cannot read, and glibc falls back to
  clone when the kernel says ENOSYS, so threads and subprocesses keep working;
- system calls of another ABI (x32, i386 through int 0x80): EPERM, so that no second system call
  table bypasses the numbers above.

The filter is classic BPF written out here (no libseccomp needed: nothing to install, nothing to
be missing), installed with prctl after no_new_privs in the worker's pre-exec step, so it holds
from the first instruction of the worker's interpreter, and is inherited by everything it starts.
`sysctl user.max_user_namespaces = 0` was the other option; it would need the worker to be root in
a user namespace of its own first, which the grader's isolation levels do not give it.

Where the filter cannot be installed (an architecture other than x86_64 and aarch64, a kernel
without seccomp) `available()` is False: the worker runs without it, and the isolation recorded
in result.json says so. The kernel cache does not rely on it either way (grader/engine/kernel_cache.py
collects it with the worker's own credentials).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import platform
import struct

PR_SET_SECCOMP, PR_GET_SECCOMP = 22, 21
SECCOMP_MODE_FILTER = 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
# classic BPF opcodes used below
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
# offsets into struct seccomp_data: nr, arch, then args[0] (its low 32 bits; little-endian only)
NR_OFFSET, ARCH_OFFSET, ARG0_LOW_OFFSET = 0, 4, 16
CLONE_NEW_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
X32_SYSCALL_BIT = 0x40000000
# the new mount API has one number on every architecture
MOUNT_API = {
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_tree_attr": 467,
}


class _Arch:
    def __init__(self, audit: int, clone: int, clone3: int, denied: dict[str, int], foreign_bit: int | None) -> None:
        self.audit, self.clone, self.clone3, self.denied, self.foreign_bit = audit, clone, clone3, denied, foreign_bit


ARCHES = {
    "x86_64": _Arch(
        0xC000003E,
        56,
        435,
        {"unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, **MOUNT_API},
        X32_SYSCALL_BIT,
    ),
    "aarch64": _Arch(
        0xC00000B7,
        220,
        435,
        {"unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, **MOUNT_API},
        None,
    ),
}


def program(machine: str | None = None) -> bytes | None:
    """The filter for this machine (or `machine`), as packed `struct sock_filter`s; None if unknown."""
    arch = ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    # (code, jump-if-true label, jump-if-false label, k); labels name the return blocks at the end
    body: list[tuple[int, str | int, str | int, int]] = [
        (LD_W_ABS, 0, 0, ARCH_OFFSET),
        (JEQ_K, 0, "eperm", arch.audit),
        (LD_W_ABS, 0, 0, NR_OFFSET),
    ]
    if arch.foreign_bit is not None:
        body.append((JGE_K, "eperm", 0, arch.foreign_bit))
    body += [(JEQ_K, "eperm", 0, nr) for nr in sorted(set(arch.denied.values()))]
    body += [
        (JEQ_K, "enosys", 0, arch.clone3),
        (JEQ_K, 0, "allow", arch.clone),
        (LD_W_ABS, 0, 0, ARG0_LOW_OFFSET),
        (JSET_K, "eperm", "allow", CLONE_NEW_FLAGS),
    ]
    returns = {"allow": RET_ALLOW, "eperm": RET_ERRNO | errno.EPERM, "enosys": RET_ERRNO | errno.ENOSYS}
    where = {label: len(body) + i for i, label in enumerate(returns)}
    packed = b""
    for index, (code, jt, jf, k) in enumerate(body):
        jumps = [where[j] - index - 1 if isinstance(j, str) else j for j in (jt, jf)]
        packed += struct.pack("<HBBI", code, jumps[0], jumps[1], k)
    for value in returns.values():
        packed += struct.pack("<HBBI", RET_K, 0, 0, value)
    return packed


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Filter:
    """The filter built in the parent, so the child between fork and exec only calls prctl."""

    def __init__(self) -> None:
        code = program()
        self.ok = code is not None and _kernel_has_seccomp()
        self._buffer = ctypes.create_string_buffer(code or b"", len(code or b""))
        self._prog = _Prog(len(code or b"") // 8, ctypes.cast(self._buffer, ctypes.c_void_p))
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = self._libc.prctl

    def install(self) -> None:
        """Install it in this process (no_new_privs must be set first). Raises OSError on failure."""
        if self._prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"seccomp filter: {errno.errorcode.get(err, err)}")


def _kernel_has_seccomp() -> bool:
    """PR_GET_SECCOMP answers 0 or 2 where the kernel has seccomp, EINVAL where it has none."""
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0


@functools.cache
def worker_filter() -> Filter:
    """One Filter per process (built once; its buffer must outlive every fork that uses it)."""
    return Filter()


def available() -> bool:
    return worker_filter().ok
