"""Per-submission Triton caches, kept between gradings of the same code.

A worker's Triton cache lives in its private home and dies with it, so without this every grading
compiles (and autotunes) the submission's kernels again: most of a GPU grading's wall time. The
orchestrator keeps a copy per submission content hash and problem, and seeds the next worker of
that same submission with it.

Trust: a cache is written by a process that ran the submission, so it is data from the
submission. It only ever goes back to a worker of the same content hash (a poisoned cache can
only hurt the code that poisoned it), and the orchestrator never loads it. It is collected with
the worker's own credentials (grader/engine/sandbox/kernel_copy.py): root reads a tar
stream, never a path the worker could have linked or mounted somewhere else (issue 17: a bind
mount over the cache once handed a root-only file to the next grading). Only the kinds of file
Triton writes are kept, each slot is capped in bytes and files, and the whole cache is capped
too, least recently used slots going first; `grader kernel-cache list|prune` is the staff's view.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import stat
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

MAX_BYTES = 512 << 20
MAX_FILES = 20_000
#: entries of any kind read from a worker's cache (a slot of MAX_FILES files holds at most one
#: folder per file), and the seconds spent reading them: 400k empty files in a worker's cache
#: once tripled a grading's time (issue 29); past either bound the copy stops and says so
MAX_MEMBERS = 2 * MAX_FILES
RECEIVE_S = 30.0
ENV = "GRADER_KERNEL_CACHE"


def default_root() -> Path:
    """$GRADER_KERNEL_CACHE, else ~/.cache/triton-kernels-grader/kernels."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "triton-kernels-grader" / "kernels"


def slot(root: Path, sha256: str, problem: str) -> Path:
    """Where one submission's cache for one problem is kept."""
    return root / sha256[:32] / problem


def root_of(kept: Path) -> Path:
    """The cache folder a slot belongs to (the inverse of `slot`)."""
    return kept.parent.parent


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0
    truncated: bool = False
    #: why the copy stopped before the end of the cache (a bound of the orchestrator's work), if it did
    stopped: str = ""


def copy_tree(source: Path, dest: Path, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES) -> Copied:
    """Copy the regular files under `source` to `dest`; links, devices and FIFOs are skipped.

    Every open is relative to a directory descriptor with O_NOFOLLOW (os.fwalk without following
    links, and it refuses a `source` that is itself a link), so a link planted anywhere in the
    tree cannot lead the copy outside it.
    """
    copied = Copied()
    if not os.path.lexists(source):
        return copied
    dest.mkdir(parents=True, exist_ok=True, mode=0o700)
    for dirpath, _dirnames, filenames, dirfd in os.fwalk(source, follow_symlinks=False):
        rel = Path(dirpath).relative_to(source)
        if len(rel.parts) > 16:
            continue
        for name in filenames:
            if copied.files >= max_files:
                copied.truncated = True
                return copied
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
            except OSError:
                continue  # a link (ELOOP), gone, or unreadable
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    continue
                if copied.bytes + st.st_size > max_bytes:
                    copied.truncated = True
                    continue
                target = dest / rel / name
                target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                with os.fdopen(os.dup(fd), "rb") as src, open(target, "wb") as out:
                    written = _copy_capped(src, out, max_bytes - copied.bytes)
                copied.files += 1
                copied.bytes += written
            finally:
                os.close(fd)
    return copied


def _copy_capped(src: object, out: object, limit: int) -> int:
    written = 0
    while written < limit:
        chunk = src.read(min(1 << 20, limit - written))  # type: ignore[attr-defined]
        if not chunk:
            break
        out.write(chunk)  # type: ignore[attr-defined]
        written += len(chunk)
    return written


# -- collecting a worker's cache -----------------------------------------------------------------
#
# Root never opens a path inside the worker's cache: the worker's own credentials do (grader/
# sandbox/kernel_copy.py starts `tar` as the worker's uid, in the worker's mount namespace, under the same
# seccomp filter, without following links or crossing into another file system) and stream it
# here, where only what Triton itself writes is kept, within the caps. A submission can therefore
# only ever keep bytes it could read itself, and only in the shapes below.

#: the kinds of file Triton 3.x writes into its cache, each as <cache>/<key>/<file>: the source
#: and IR stages (.source .ttir .ttgir .llir, .ptx/.cubin on NVIDIA, .amdgcn/.hsaco on AMD),
#: metadata, group and autotuning JSON, and the compiled launcher modules (.so)
TRITON_KINDS = (".source", ".ttir", ".ttgir", ".llir", ".ptx", ".cubin", ".amdgcn", ".hsaco", ".json", ".so")
_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,199}\Z")
MAX_FILE_BYTES = 64 << 20
#: what the stream may carry in all (what is not kept is read and dropped, up to this)
MAX_STREAM_BYTES = 2 * MAX_BYTES


def triton_file(rel: PurePosixPath) -> bool:
    """Whether `rel` (relative to a Triton cache) is a file Triton writes: <key>/<name>.<kind>.

    Triton's temporary folders (`<key>/tmp.pid_...`) and anything deeper or shallower are not.
    """
    return len(rel.parts) == 2 and all(_NAME.match(part) for part in rel.parts) and rel.name.endswith(TRITON_KINDS)


class _Counted:
    """A read-only stream that stops (EOF) after `limit` bytes and says whether it was cut."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self.raw, self.left, self.cut = raw, limit, False

    def read(self, size: int = -1) -> bytes:
        want = self.left if size < 0 else min(size, self.left)
        data = self.raw.read(want) if want > 0 else b""
        self.left -= len(data)
        if self.left <= 0 and size != 0:
            self.cut = True
        return data


def receive(stream: IO[bytes], dest: Path, max_bytes: int = MAX_BYTES, max_files: int = MAX_FILES) -> Copied:
    """Keep the Triton files of a tar stream of a worker's `.triton` folder in the new folder `dest`.

    Regular members only (links, devices, FIFOs and sparse files are skipped, never created),
    named as `triton_file` wants, each at most MAX_FILE_BYTES, within the caps; a broken or cut
    stream keeps the whole files read before it.
    """
    copied = Copied()
    counted = _Counted(stream, MAX_STREAM_BYTES)
    dest.mkdir(mode=0o700)
    try:
        with tarfile.open(fileobj=counted, mode="r|") as archive:  # type: ignore[call-overload]
            until = time.monotonic() + RECEIVE_S
            for seen, member in enumerate(archive):
                if seen >= MAX_MEMBERS or time.monotonic() > until:
                    copied.truncated = True
                    copied.stopped = f"stopped after {seen} entries (at most {MAX_MEMBERS}, in {RECEIVE_S:g} s)"
                    break
                rel = PurePosixPath(member.name)
                rel = PurePosixPath(*rel.parts[1:]) if rel.parts[:1] == (".triton",) else PurePosixPath("..")
                if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or not triton_file(rel):
                    continue
                if copied.files >= max_files or copied.bytes + member.size > max_bytes or member.size > MAX_FILE_BYTES:
                    copied.truncated = True
                    continue
                source = archive.extractfile(member)
                if source is None:
                    continue
                target = dest / rel.parts[0]
                target.mkdir(mode=0o700, exist_ok=True)
                fd = os.open(
                    target / rel.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
                )
                with os.fdopen(fd, "wb") as out:
                    written = _copy_capped(source, out, member.size)
                if written != member.size:
                    (target / rel.name).unlink()
                    raise tarfile.ReadError("the stream ended inside a file")
                copied.files += 1
                copied.bytes += written
    except (tarfile.TarError, EOFError, OSError, ValueError):
        copied.truncated = True
    copied.truncated |= counted.cut
    return copied


def keep(fill: Callable[[Path], Copied], dest: Path) -> Copied:
    """Replace the cache kept at `dest` with what `fill(new_folder)` puts there, atomically.

    Nothing is replaced when `fill` keeps no file. The slot is stamped as just used (see evict).
    """
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
    try:
        copied = fill(tmp)
        if not copied.files:
            return copied
        old = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.old")
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
        touch(dest)
        return copied
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def restore_into(seed_dir: Path, cache_dir: Path) -> None:
    """In the worker, before the submission is imported: the seed into its own Triton cache."""
    copy_tree(seed_dir, cache_dir)
    for group_file in cache_dir.rglob(f"{GROUP_PREFIX}*"):
        rehome_group(group_file, cache_dir)


# Triton lists a compiled kernel's files (binary, IRs, metadata) in a group file by absolute path,
# and a group with a missing path is a miss: moved to another worker's cache directory, every
# kernel would be compiled again (only autotuning results, looked up by name, would survive).
GROUP_PREFIX = "__grp__"


def rehome_group(group_file: Path, cache_dir: Path) -> None:
    """Point a restored group file's paths into `cache_dir` (each is <cache>/<key>/<file>)."""
    try:
        data = json.loads(group_file.read_text())
        children = data["child_paths"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if not isinstance(children, dict):
        return
    moved = {}
    for child, old in children.items():
        if not isinstance(old, str):
            return
        key, name = Path(old).parent.name, Path(old).name
        if key in ("", ".", "..") or name in ("", ".", ".."):
            return
        moved[child] = str(cache_dir / key / name)
    group_file.write_text(json.dumps({**data, "child_paths": moved}))


# -- the cache as a whole: least recently used first out, and the staff's view of it --------------

TOTAL_ENV = "GRADER_KERNEL_CACHE_MAX_BYTES"
#: the whole cache, every submission and problem together (about 45 full GPU gradings' worth)
MAX_TOTAL_BYTES = 8 << 30


@dataclass
class Kept:
    """One slot of the cache: a submission's (content hash) compiled kernels for one problem."""

    path: Path
    files: int
    bytes: int
    used: float  # when it was last saved or seeded from (its folder's mtime)

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def touch(kept: Path) -> None:
    """Mark a slot as just used: eviction removes the least recently used first."""
    try:
        os.utime(kept)
    except OSError:
        pass


def max_total_bytes() -> int:
    """$GRADER_KERNEL_CACHE_MAX_BYTES (a size such as 8G), else MAX_TOTAL_BYTES."""
    configured = os.environ.get(TOTAL_ENV)
    return parse_size(configured) if configured else MAX_TOTAL_BYTES


def parse_size(text: str) -> int:
    """`8G`, `512M`, `100k` or a number of bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)i?[bB]?\s*", text)
    if not match:
        raise ValueError(f"not a size: {text!r} (expected e.g. 8G, 512M or a number of bytes)")
    return int(float(match.group(1)) * (1 << (10 * " KMGT".index(match.group(2).upper() or " "))))


def slots(root: Path) -> list[Kept]:
    """Every slot under `root`, least recently used first."""
    found = []
    for sha_dir in _folders(root):
        for problem_dir in _folders(sha_dir):
            files = size = 0
            for dirpath, _dirnames, filenames in os.walk(problem_dir):
                for name in filenames:
                    try:
                        size += os.lstat(os.path.join(dirpath, name)).st_size
                        files += 1
                    except OSError:
                        continue
            try:
                used = os.lstat(problem_dir).st_mtime
            except OSError:
                continue
            found.append(Kept(problem_dir, files, size, used))
    return sorted(found, key=lambda k: k.used)


def _folders(parent: Path) -> list[Path]:
    try:
        return [p for p in parent.iterdir() if not p.name.startswith(".") and p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def evict(root: Path, max_total: int | None = None, older_than_s: float | None = None) -> list[Kept]:
    """Remove least recently used slots until the cache holds at most `max_total` bytes (and,
    with `older_than_s`, every slot unused for that long); returns what was removed."""
    limit = max_total_bytes() if max_total is None else max_total
    if not root.is_dir():
        return []
    with open(root / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two graders of one cache do not evict the same slot twice
        kept = slots(root)
        total = sum(k.bytes for k in kept)
        now = time.time()
        removed = []
        for slot_ in kept:
            stale = older_than_s is not None and now - slot_.used > older_than_s
            if total <= limit and not stale:
                continue
            shutil.rmtree(slot_.path, ignore_errors=True)
            total -= slot_.bytes
            removed.append(slot_)
            try:
                slot_.path.parent.rmdir()  # the submission's folder, once its last problem is gone
            except OSError:
                pass
    return removed
