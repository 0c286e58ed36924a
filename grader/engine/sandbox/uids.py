"""Transient uids: one per worker, from a range no account uses, reserved with a lock file.

A uid of its own makes RLIMIT_NPROC count that worker's processes alone, keeps it from
signalling, tracing or reading any other worker, and lets the sweep kill all it left behind.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import random
import stat
import tempfile
from pathlib import Path

from grader.engine.sandbox.processes import process_ids

TRANSIENT_UIDS = range(1_900_000_000, 1_901_000_000)


def _mapped(path: str, ids: range) -> bool:
    """Whether `ids` lies inside one range of this user namespace's uid_map or gid_map."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            inside, count = int(parts[0]), int(parts[2])
            if inside <= ids.start and ids.stop <= inside + count:
                return True
    return False


class UidLease:
    """A uid (and gid of the same number) that no account owns and no process uses, held by lock."""

    def __init__(self, uid: int, lock_fd: int, lock_path: Path) -> None:
        self.uid = self.gid = uid
        self._fd, self._path = lock_fd, lock_path

    def release(self) -> None:
        if self._fd < 0:
            return
        try:
            self._path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1


def lock_dir(name: str = "grader-uid-locks") -> Path | None:
    """A folder of this user's alone for locks: in /run (one place for every grader on the host) or
    else the temp dir; None where it is somebody else's or others may write it."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / name
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    # somebody else's folder, or one others may write, cannot vouch for a reservation
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return folder


def lease_uid(pool: range = TRANSIENT_UIDS, attempts: int = 64) -> UidLease | None:
    """Reserve a transient uid for one worker; None where the pool is not mapped or no lock works."""
    if not (_mapped("/proc/self/uid_map", pool) and _mapped("/proc/self/gid_map", pool)):
        return None
    folder = lock_dir()
    if folder is None:
        return None
    rng = random.SystemRandom()
    for _ in range(attempts):
        uid = rng.randrange(pool.start, pool.stop)
        try:
            pwd.getpwuid(uid)
            continue  # an account has it
        except KeyError:
            pass
        path = folder / str(uid)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # the holder may have unlinked the file between our open and our lock: then it is stale
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise BlockingIOError
        except OSError:
            os.close(fd)
            continue
        if process_ids(uid):
            os.close(fd)
            continue
        return UidLease(uid, fd, path)
    return None
