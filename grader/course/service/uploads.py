"""What an upload may cost before it is refused: tight archive caps, and a refusal budget per student.

An upload is checked as `grader batch` checks an archive, but under caps fit for a packed
submission (a few kilobytes of Python): the declared sizes of every member are summed from the
headers, streamed before anything is written, so an archive that would inflate past the caps is
refused after reading at most a few megabytes. Each refused upload (too large, a bad archive)
is counted against its student: past REFUSALS_PER_HOUR in the last hour, their uploads are
refused before their bodies are read. Counted in memory, per person (the roster bounds it); a
restart forgets the counts, as it forgets the rate limit's.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from grader.course.batch import archives
from grader.course.batch.archive_limits import ArchiveError, Limits
from grader.course.service.limits import RateLimiter

#: a packed submission is four kernel files: generous, and each refusal stays cheap
UPLOAD_LIMITS = Limits(
    max_total_bytes=8 << 20,
    max_file_bytes=2 << 20,
    max_files=200,
    max_entries=800,
    max_seconds=10.0,
    max_ratio=20.0,
)
#: refused uploads a student may make in an hour before their uploads are refused unread
REFUSALS_PER_HOUR = 10
HOUR = 3600.0


def archive_problem(data: bytes, name: str, modules: list[str]) -> str | None:
    """Why the upload is not a submission (None: it is), after the checks `grader batch` makes."""
    with tempfile.TemporaryDirectory(prefix="grader-upload-") as scratch:
        path = Path(scratch) / name
        path.write_bytes(data)
        try:
            archives.find_submission_root(archives.unpack(path, Path(scratch) / "unpacked", UPLOAD_LIMITS), modules)
        except ArchiveError as exc:
            return str(exc)
    return None


class RefusalBudget(RateLimiter):
    """Refused uploads per person in a sliding hour: the rate limit's window, counted by `add` when
    an upload is refused and read by `wait` before the next is."""

    def __init__(self, per_hour: int = REFUSALS_PER_HOUR) -> None:
        super().__init__(per_hour, HOUR)

    @property
    def per_hour(self) -> int:
        return self.limit

    @per_hour.setter
    def per_hour(self, value: int) -> None:
        self.limit = value
