"""Where every written file goes through: atomic writes, the templates they render from, and
the content hash a record names its submission by.

A file is written to a temporary name in its own folder, synced, then renamed, so a grader killed
at any moment leaves either the old file or the new one, never half of one. The hash is here, with
the records, because both sides of grader.engine.orchestrator.launch compute it: the engine records it, a batch skips
a student whose record has the same one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def submission_files(path: Path) -> list[Path]:
    skip = {"__pycache__", ".git", ".ipynb_checkpoints"}
    return sorted(
        p for p in path.rglob("*") if not p.is_symlink() and p.is_file() and not skip & set(p.relative_to(path).parts)
    )


def submission_hash(path: Path) -> str:
    """Content hash over relative paths and bytes: the same files give the same hash anywhere."""
    digest = hashlib.sha256()
    for file in submission_files(path):
        digest.update(str(file.relative_to(path)).encode() + b"\x00")
        digest.update(file_sha256(file))
    return digest.hexdigest()


def file_sha256(path: Path) -> bytes:
    """One file's SHA-256, read in 1 MiB chunks (hashlib.file_digest is Python 3.11+)."""
    file_digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            file_digest.update(chunk)
    return file_digest.digest()
