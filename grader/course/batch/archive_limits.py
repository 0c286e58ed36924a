"""The bounds an archive is unpacked under: counts, sizes, depth, time, and how far it may inflate.

A budget is charged as members are read, so a lying header or a decompression bomb stops at the
bound that it crosses, with the rule named, before anything more is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import IO


class ArchiveError(Exception):
    """The archive is unsafe or unreadable; the message says which member and why."""


@dataclass(frozen=True)
class Limits:
    """Caps on what one archive may unpack to. The defaults are generous for four kernel files."""

    max_archive_bytes: int = 64 << 20
    max_total_bytes: int = 64 << 20
    max_file_bytes: int = 16 << 20
    max_files: int = 500
    max_depth: int = 8
    #: members of every kind: files, folders, and anything else with a header
    max_entries: int = 2000
    #: the whole unpacking, both passes, in seconds
    max_seconds: float = 30.0
    #: how many times its own size an archive may inflate to (beyond ratio_floor_bytes)
    max_ratio: float = 100.0
    ratio_floor_bytes: int = 1 << 20


class Clock:
    """The deadline of one unpacking, checked in every loop and every read."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise ArchiveError(f"unpacking took more than {self.limits.max_seconds:g} s")


class Inflated:
    """A decompressed stream that stops at the inflation bound and at the deadline."""

    def __init__(self, raw: IO[bytes], packed: int, limits: Limits, clock: Clock) -> None:
        self.raw, self.clock = raw, clock
        self.limit = max(limits.ratio_floor_bytes, int(limits.max_ratio * packed))
        self.ratio = limits.max_ratio
        self.total = 0

    def read(self, size: int = -1) -> bytes:
        self.clock.check()
        data = self.raw.read(self.limit + 1 - self.total if size < 0 else size)
        self.total += len(data)
        if self.total > self.limit:
            raise ArchiveError(f"inflates to more than {self.limit} bytes (over {self.ratio:g} times its own size)")
        return data


class Budget:
    """Running totals against the limits, shared by the checking and the writing pass."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.files = 0
        self.bytes = 0
        self.entries = 0

    def add_entry(self) -> None:
        self.entries += 1
        if self.entries > self.limits.max_entries:
            raise ArchiveError(
                f"more than {self.limits.max_entries} entries (files, folders and other headers) in the archive"
            )

    def add_file(self, name: str, size: int) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise ArchiveError(f"more than {self.limits.max_files} files in the archive")
        if size > self.limits.max_file_bytes:
            raise ArchiveError(
                f"member {name!r}: {size} bytes uncompressed (at most {self.limits.max_file_bytes} per file)"
            )
        self.bytes += size
        if self.bytes > self.limits.max_total_bytes:
            raise ArchiveError(f"more than {self.limits.max_total_bytes} bytes uncompressed in all")
