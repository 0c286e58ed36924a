"""The C library calls the sandbox needs that Python's os module lacks (mount, unshare, setns).

Resolved in the parent, so that the child, between fork and exec, only makes system calls.
"""

from __future__ import annotations

import ctypes
import os
import re

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS = 38
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (new syscall table)
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2


class MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


_LIBC: ctypes.CDLL | None = None


def load_libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("mount", "unshare", "prctl", "syscall", "setns"):
            getattr(libc, name)  # resolve now: no dlsym (and its locks) between fork and exec
        _LIBC = libc
    return _LIBC


def mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def kernel_at_least(major: int, minor: int) -> bool:
    match = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (major, minor)
