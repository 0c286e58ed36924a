"""Per-submission Triton caches, kept between gradings of the same code.

A worker's Triton cache lives in its private home and dies with it, so without this every grading
compiles (and autotunes) the submission's kernels again: most of a GPU grading's wall time. The
orchestrator keeps a copy per submission content hash and problem, and seeds the next worker of
that same submission with it.

Trust: a cache is written by a process that ran the submission, so it is data from the
submission. It only ever goes back to a worker of the same content hash (a poisoned cache can
only hurt the code that poisoned it), the orchestrator never loads it, and copies take regular
files only, never follow a link and stop at a cap on bytes and files.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 512 << 20
MAX_FILES = 20_000
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


@dataclass
class Copied:
    files: int = 0
    bytes: int = 0
    truncated: bool = False


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


def save(source: Path, dest: Path) -> Copied:
    """Replace the cache kept at `dest` with a capped copy of `source`, atomically."""
    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.tmp")
    try:
        copied = copy_tree(source, tmp)
        if not copied.files:
            return copied
        old = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}.old")
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
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
