"""One student's task: the entry unpacked (archives) or checked (folders), located and hashed.

Archives are unpacked by grader.course.batch.archives into OUT/.work/<student>/ and never trusted; a folder
entry gets the same rules. What cannot be unpacked becomes the task's error, never the batch's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from grader.course.batch import archives
from grader.course.batch.discovery import WORK, Entry
from grader.engine.records.files import file_sha256, submission_hash

DEFAULT_LIMITS = archives.Limits()

SKIPPED_FOLDERS = {".git", "__pycache__", ".ipynb_checkpoints"}  # never graded, not counted


@dataclass
class Task:
    """One student in this run: where the files go, the folder to grade, its hash, or why it cannot be graded."""

    entry: Entry
    out: Path  # DIR/<student>: the committed files
    work: Path  # DIR/.work/<student>: unpacked files, raw output of the run
    folder: Path | None = None  # the submission folder to grade
    sha: str = ""
    error: str = ""

    @property
    def student(self) -> str:
        return self.entry.student


def check_folder(folder: Path, limits: archives.Limits) -> None:
    """A folder entry gets the archive rules too: no links, the same caps on count and size."""
    files = total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_FOLDERS or (Path(dirpath) / d).is_symlink()]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                raise archives.ArchiveError(
                    f"{path.relative_to(folder)} is a symbolic link (links are not allowed in a submission)"
                )
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_file():
                raise archives.ArchiveError(f"{path.relative_to(folder)} is not a regular file")
            files += 1
            total += path.stat().st_size
        if files > limits.max_files or total > limits.max_total_bytes:
            raise archives.ArchiveError(f"more than {limits.max_files} files or {limits.max_total_bytes} bytes")


def prepare(entry: Entry, out: Path, modules: list[str], limits: archives.Limits = DEFAULT_LIMITS) -> Task:
    """Unpack (archives) and locate the submission, and hash its content."""
    task = Task(entry, out / entry.student, out / WORK / entry.student)
    source = entry.source
    if entry.kind == "invalid":
        task.error = entry.error
        task.sha = (
            file_sha256(source).hex()
            if source.is_file() and not source.is_symlink()
            else hashlib.sha256(str(source).encode()).hexdigest()
        )
        return task
    try:
        if entry.kind == "archive":
            shutil.rmtree(task.work, ignore_errors=True)
            task.work.mkdir(parents=True)
            unpacked = archives.unpack(source, task.work / "unpacked", limits)
        else:
            check_folder(source, limits)
            unpacked = source
        task.folder = archives.find_submission_root(unpacked, modules)
        task.sha = submission_hash(task.folder)
    except archives.ArchiveError as exc:
        task.error = f"bad archive: {exc}" if entry.kind == "archive" else f"bad submission folder: {exc}"
        task.sha = file_sha256(source).hex() if source.is_file() else hashlib.sha256(str(source).encode()).hexdigest()
        task.folder = None
    except OSError as exc:
        task.error = f"cannot read {source.name}: {exc}"
        task.sha = hashlib.sha256(str(source).encode()).hexdigest()
        task.folder = None
    return task
