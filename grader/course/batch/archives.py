"""Unpacking student archives (.zip, .tar, .tar.gz, .tgz, .tar.bz2, .tar.xz) without trusting them.

An archive is student input: it may carry `../` or absolute names (zip slip), links that point
outside the folder, devices, or a few kilobytes that inflate to gigabytes. Nothing here calls
`extractall`: every member is checked first (names, type, declared sizes, counts, depth), then
regular files are written one by one into a fresh folder, with the bytes counted as they are
written (declared sizes can lie). Links of any kind are refused outright: a submission is a few
Python files and has no use for them. Any violation raises `ArchiveError` naming the member and
the rule, and nothing is left behind in the destination.

Caps count every entry, folders and headers included, and bound the whole unpacking in time and
in how far the archive may inflate (issue 17: 1.3 MiB of 600 000 folder headers held a batch
for minutes). Tar archives are decompressed here, through a reader that stops at those bounds,
so nothing tarfile reads (long-name and pax headers included) escapes them. A member name that
is not UTF-8 is kept with each such byte written as `%XX`; an archive's own name may be anything.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from grader.course.batch.archive_limits import ArchiveError, Budget, Clock, Inflated, Limits

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar")
# Looks like an archive but cannot be read here: an error row, not a silently ignored file.
UNSUPPORTED_SUFFIXES = (".rar", ".7z", ".gz", ".bz2", ".xz", ".zst", ".tar.zst")
# Folders that archivers add and nobody wants graded.
JUNK_PARTS = {"__MACOSX", ".DS_Store"}
DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Member:
    """One checked archive member: a safe relative path, and whether it is a folder."""

    path: PurePosixPath
    is_dir: bool
    size: int


def archive_suffix(path: Path) -> str | None:
    """The archive suffix of `path` (".zip", ".tar.gz", ...), or None when it is not an archive."""
    name = path.name.lower()
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix):
            return suffix
    return None


def is_unsupported_archive(path: Path) -> bool:
    name = path.name.lower()
    return archive_suffix(path) is None and name.endswith(UNSUPPORTED_SUFFIXES)


def strip_archive_suffix(name: str) -> str:
    """`alice.tar.gz` -> `alice`; also for archive kinds that cannot be read (`bob.rar` -> `bob`)."""
    lower = name.lower()
    for suffix in sorted(ARCHIVE_SUFFIXES + UNSUPPORTED_SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return name[: -len(suffix)]
    return name


def safe_member_path(name: str, limits: Limits) -> PurePosixPath | None:
    """The member's path relative to the destination, or None for the archive's own root entry.

    Refuses absolute paths (also Windows drive letters and UNC names), `..` components, NUL bytes
    and paths deeper than the cap. Backslashes count as separators: Windows zip tools write them.
    """
    if "\x00" in name:
        raise ArchiveError(f"member {name!r}: NUL byte in its name")
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise ArchiveError(f"member {name!r}: absolute path (members must stay inside the archive's folder)")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ArchiveError(f"member {name!r}: '..' in its path (members must stay inside the archive's folder)")
    if not parts:
        return None
    if len(parts) > limits.max_depth:
        raise ArchiveError(f"member {name!r}: nested {len(parts)} levels deep (at most {limits.max_depth})")
    return PurePosixPath(*parts)


def _zip_members(
    archive: zipfile.ZipFile, limits: Limits, clock: Clock, packed: int
) -> Iterator[tuple[Member, zipfile.ZipInfo]]:
    budget = Budget(limits)
    infos = archive.infolist()
    if len(infos) > limits.max_entries:
        raise ArchiveError(f"{len(infos)} entries (files, folders and other headers); at most {limits.max_entries}")
    inflated = sum(max(info.file_size, 0) for info in infos)
    if inflated > max(limits.ratio_floor_bytes, limits.max_ratio * packed):
        raise ArchiveError(f"declares {inflated} bytes uncompressed, over {limits.max_ratio:g} times its own size")
    for info in infos:
        clock.check()
        budget.add_entry()
        path = safe_member_path(info.filename, limits)
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise ArchiveError(f"member {info.filename!r}: a symbolic link (links are not allowed in a submission)")
        if stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):  # no type bits: a plain file
            raise ArchiveError(f"member {info.filename!r}: not a regular file or folder")
        if info.flag_bits & 0x1:
            raise ArchiveError(f"member {info.filename!r}: encrypted (submit an archive without a password)")
        if path is None:
            continue
        is_dir = info.is_dir()
        if not is_dir:
            budget.add_file(info.filename, info.file_size)
        yield Member(path, is_dir, info.file_size), info


def _tar_members(archive: tarfile.TarFile, limits: Limits, clock: Clock) -> Iterator[tuple[Member, tarfile.TarInfo]]:
    budget = Budget(limits)
    for info in archive:  # headers one at a time: a bomb is refused before it is read through
        clock.check()
        budget.add_entry()
        path = safe_member_path(info.name, limits)
        if info.issym() or info.islnk():
            kind = "symbolic" if info.issym() else "hard"
            raise ArchiveError(
                f"member {info.name!r}: a {kind} link to {info.linkname!r} (links are not allowed in a submission)"
            )
        if not (info.isfile() or info.isdir()):
            raise ArchiveError(
                f"member {info.name!r}: not a regular file or folder (device, fifo or other special file)"
            )
        if path is None:
            continue
        if info.isfile():
            budget.add_file(info.name, info.size)
        yield Member(_printable(path), info.isdir(), info.size), info


def _printable(path: PurePosixPath) -> PurePosixPath:
    """`path` with each byte that was not UTF-8 (tarfile keeps them as surrogates) as `%XX`."""
    return PurePosixPath(
        *("".join(f"%{ord(c) - 0xDC00:02X}" if 0xDC80 <= ord(c) <= 0xDCFF else c for c in part) for part in path.parts)
    )


def _is_junk(path: PurePosixPath) -> bool:
    return bool(JUNK_PARTS & set(path.parts)) or path.name.startswith("._")


def _write(source: IO[bytes], target: Path, declared: int, limits: Limits, written: list[int], clock: Clock) -> None:
    """Copy one member's bytes, stopping at its declared size, at the total cap and at the deadline."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(target, flags, 0o644)
    with os.fdopen(fd, "wb") as out:
        size = 0
        while True:
            clock.check()
            chunk = source.read(1 << 16)
            if not chunk:
                break
            size += len(chunk)
            written[0] += len(chunk)
            if size > max(declared, 0) or size > limits.max_file_bytes or written[0] > limits.max_total_bytes:
                raise ArchiveError(f"member {target.name!r}: more bytes than its header declared or the caps allow")
            out.write(chunk)


def _ensure_dir(dest: Path, rel: PurePosixPath) -> Path:
    """Create `dest/rel` as plain folders, checking that no step leaves `dest`."""
    current = dest
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise ArchiveError(f"{rel}: a link in the way")
        if current.exists() and not current.is_dir():
            raise ArchiveError(f"{rel}: both a file and a folder in the archive")
        current.mkdir(mode=0o755, exist_ok=True)
    if dest.resolve() not in (current.resolve(), *current.resolve().parents):
        raise ArchiveError(f"{rel}: resolves outside the destination")
    return current


def unpack(archive: Path, dest: Path, limits: Limits = DEFAULT_LIMITS) -> Path:
    """Unpack `archive` into the new folder `dest` (which must not exist yet) and return it.

    Raises ArchiveError for an unsafe or unreadable archive; `dest` is then removed again.
    """
    suffix = archive_suffix(archive)
    if suffix is None:
        raise ArchiveError(f"{archive.name}: not a supported archive (use .zip or .tar.gz)")
    size = archive.stat().st_size
    if size > limits.max_archive_bytes:
        raise ArchiveError(
            f"{archive.name}: {size} bytes, more than the {limits.max_archive_bytes} an archive may have"
        )
    dest.mkdir(mode=0o755, parents=False, exist_ok=False)
    try:
        written, clock = [0], Clock(limits)
        if suffix == ".zip":
            _unpack_zip(archive, dest, limits, written, clock)
        else:
            _unpack_tar(archive, dest, limits, written, clock)
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (
        zipfile.BadZipFile,
        tarfile.TarError,
        EOFError,
        OSError,
        ValueError,
        NotImplementedError,
        RuntimeError,
        zlib.error,
        lzma.LZMAError,
    ) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(f"{archive.name}: cannot be read as {suffix}: {exc}") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def _place(dest: Path, member: Member) -> Path | None:
    """The file to write for `member` (its folders created), or None for a folder or junk."""
    if _is_junk(member.path):
        return None
    if member.is_dir:
        _ensure_dir(dest, member.path)
        return None
    folder = _ensure_dir(dest, member.path.parent) if member.path.parent.parts else dest
    target = folder / member.path.name
    if target.exists() or target.is_symlink():
        raise ArchiveError(f"member {str(member.path)!r}: appears twice in the archive")
    return target


def _unpack_zip(archive: Path, dest: Path, limits: Limits, written: list[int], clock: Clock) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = list(
            _zip_members(zf, limits, clock, archive.stat().st_size)
        )  # check everything before writing anything
        for member, info in members:
            clock.check()
            target = _place(dest, member)
            if target is not None:
                with zf.open(info) as source:
                    _write(source, target, member.size, limits, written, clock)


# what a compressed tar starts with, and how to read it
_DECOMPRESSORS: list[tuple[bytes, Callable[[IO[bytes]], IO[bytes]]]] = [
    (b"\x1f\x8b", lambda raw: gzip.GzipFile(fileobj=raw, mode="rb")),  # type: ignore[return-value]
    (b"BZh", lambda raw: bz2.BZ2File(raw)),  # type: ignore[return-value]
    (b"\xfd7zXZ\x00", lambda raw: lzma.LZMAFile(raw)),  # type: ignore[return-value]
]


@contextmanager
def _tar_stream(archive: Path, limits: Limits, clock: Clock) -> Iterator[tarfile.TarFile]:
    """The archive as a tar stream read through Inflated, whatever its compression (by content)."""
    with open(archive, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        opener = next((open_ for prefix, open_ in _DECOMPRESSORS if magic.startswith(prefix)), None)
        plain = opener(raw) if opener else raw
        with tarfile.open(fileobj=Inflated(plain, archive.stat().st_size, limits, clock), mode="r|") as tf:  # type: ignore[call-overload]
            yield tf


def _unpack_tar(archive: Path, dest: Path, limits: Limits, written: list[int], clock: Clock) -> None:
    """Two passes over the stream: check every member, then write the checked ones."""
    with _tar_stream(archive, limits, clock) as tf:
        checked = {info.offset: member for member, info in _tar_members(tf, limits, clock)}
    with _tar_stream(archive, limits, clock) as tf:
        for info in tf:
            clock.check()
            member = checked.get(info.offset)
            target = _place(dest, member) if member is not None else None
            if target is not None:
                source = tf.extractfile(info)
                if source is None:
                    raise ArchiveError(f"member {info.name!r}: no data")
                with source:
                    _write(source, target, member.size, limits, written, clock)  # type: ignore[union-attr]


def find_submission_root(folder: Path, modules: list[str], max_depth: int = 2) -> Path:
    """The folder that holds the submission's modules: `folder` itself, or one found below it.

    Students often zip the folder rather than its contents (`alice/<module>.py`). Prefer the
    shallowest folder holding the most expected modules; junk folders (__MACOSX) are ignored.
    Returns `folder` when no module is found anywhere (grading then reports what is missing).
    """
    wanted = {f"{m}.py" for m in modules}
    best, best_score = folder, (len(wanted & _names(folder)), 0)
    frontier = [folder]
    for depth in range(1, max_depth + 1):
        below = []
        for parent in frontier:
            try:
                children = sorted(
                    p
                    for p in parent.iterdir()
                    if p.is_dir() and not p.is_symlink() and p.name not in JUNK_PARTS and not p.name.startswith(".")
                )
            except OSError:
                continue
            below.extend(children)
        for candidate in below:
            score = (len(wanted & _names(candidate)), -depth)
            if score > best_score:
                best, best_score = candidate, score
        frontier = below
    return best


def _names(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir() if p.is_file()}
    except OSError:
        return set()
