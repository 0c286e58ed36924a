"""Finding the class: one entry per student in the submissions folder, with ids safe as folder names.

Ids come from the entry's name, a manifest (manifest.csv or manifest.json), or Gradescope's
metadata. Staff metadata is read only where staff put it: the submissions root, or, with
`nested_exports`, an export folder directly under it; a student's folder holding a
submission_metadata.yml is that student's folder, never a list of other students. An id that two
entries claim is an error row for every claimant, named in the summary: no first-come-first-served.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from grader.course.batch import archives, gradescope_metadata
from grader.course.batch.errors import BatchError

WORK = ".work"
RESERVED = {"gradebook.csv", "summary.json", WORK}
MANIFESTS = ("manifest.csv", "manifest.json")
GRADESCOPE_METADATA = "submission_metadata.yml"


@dataclass
class Entry:
    """One student's entry in the submissions folder."""

    student: str
    source: Path
    kind: str  # "folder" | "archive" | "invalid"
    error: str = ""
    #: when several entries claim this entry's id: that id and every claimant's name
    claimed: tuple[str, tuple[str, ...]] | None = None


def student_id(text: str) -> str:
    """A student id that is safe as a folder name: no separators, no leading dot, not reserved."""
    cleaned = re.sub(r"[^A-Za-z0-9._@+-]+", "_", text.strip()).lstrip(".")[:100] or "student"
    return f"student-{cleaned}" if cleaned in RESERVED else cleaned


def read_manifest(root: Path) -> dict[str, str]:
    """entry name -> student id from manifest.csv or manifest.json in `root`, if there is one.

    CSV: a header naming an entry column (entry, file, folder, submission, path or name) and an
    id column (student, student_id, sid, id or email); without such a header, the first two
    columns. JSON: {"entry": "student", ...} or [{"entry": ..., "student": ...}, ...].
    """
    path_csv, path_json = root / MANIFESTS[0], root / MANIFESTS[1]
    if path_csv.exists():
        rows = list(csv.reader(io.StringIO(path_csv.read_text(encoding="utf-8-sig"))))
        rows = [r for r in rows if any(c.strip() for c in r)]
        if not rows:
            return {}
        header = [c.strip().lower() for c in rows[0]]
        entry_col = next(
            (header.index(k) for k in ("entry", "file", "folder", "submission", "path", "name") if k in header), None
        )
        id_col = next((header.index(k) for k in ("student", "student_id", "sid", "id", "email") if k in header), None)
        if entry_col is None or id_col is None:
            entry_col, id_col = 0, 1
        else:
            rows = rows[1:]
        mapping = {}
        for n, row in enumerate(rows, start=2):
            if len(row) <= max(entry_col, id_col):
                raise BatchError(f"{path_csv}: line {n} has {len(row)} column(s); expected an entry and a student id")
            mapping[row[entry_col].strip()] = row[id_col].strip()
        return mapping
    if path_json.exists():
        try:
            data = json.loads(path_json.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BatchError(f"{path_json}: not valid JSON ({exc})") from None
        if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
            return {str(k): v for k, v in data.items()}
        if isinstance(data, list) and all(isinstance(d, dict) and "entry" in d and "student" in d for d in data):
            return {str(d["entry"]): str(d["student"]) for d in data}
        raise BatchError(
            f'{path_json}: expected {{"entry": "student id", ...}} or [{{"entry": ..., "student": ...}}, ...]'
        )
    return {}


# submission folder -> student id from an export's submission_metadata.yml (read as YAML)
read_gradescope_metadata = gradescope_metadata.read_export_metadata


def _gradescope_entries(folder: Path) -> list[tuple[str, Path]]:
    metadata = read_gradescope_metadata(folder / GRADESCOPE_METADATA)
    found = []
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and sub.name.startswith("submission_"):
            found.append((metadata.get(sub.name, sub.name), sub))
    return found


def discover(root: Path, exclude: list[Path] | None = None, nested_exports: bool = False) -> list[Entry]:
    """Every student entry under `root`, with ids made unique; sorted by id.

    `nested_exports`: folders under `root` that hold a submission_metadata.yml are Gradescope
    exports (staff asked for it: `grader batch --nested-exports`), not students.
    """
    if not root.is_dir():
        raise BatchError(f"{root} is not a folder of submissions")
    manifest = read_manifest(root)
    skip = {p.resolve() for p in exclude or []}
    raw: list[tuple[str, Path]] = []
    if (root / GRADESCOPE_METADATA).exists():
        raw = _gradescope_entries(root)
    else:
        for path in sorted(root.iterdir()):
            if path.name.startswith(".") or path.name in MANIFESTS or path.resolve() in skip:
                continue
            if nested_exports and path.is_dir() and (path / GRADESCOPE_METADATA).exists():
                raw += _gradescope_entries(path)
            elif path.is_dir() or archives.archive_suffix(path) or archives.is_unsupported_archive(path):
                name = (
                    manifest.get(path.name)
                    or manifest.get(archives.strip_archive_suffix(path.name))
                    or archives.strip_archive_suffix(path.name)
                )
                raw.append((name, path))
    return sorted(_entries(raw), key=lambda e: e.student)


def _entries(raw: list[tuple[str, Path]]) -> list[Entry]:
    """One entry per (id, path); every claimant of an id claimed more than once is an error row."""
    claims: dict[str, list[Path]] = {}
    for name, path in raw:
        claims.setdefault(student_id(name), []).append(path)
    entries = []
    for sid, paths in claims.items():
        for n, path in enumerate(paths, start=1):
            kind = "folder" if path.is_dir() and not path.is_symlink() else "archive"
            error = ""
            if path.is_symlink():
                kind, error = "invalid", f"{path.name} is a symbolic link: submit the files themselves"
            elif kind == "archive" and archives.archive_suffix(path) is None:
                kind, error = "invalid", f"{path.name}: unsupported archive format (use .zip or .tar.gz)"
            if len(paths) > 1:
                names = ", ".join(p.name for p in paths)
                kind, error = (
                    "invalid",
                    (
                        f"duplicate student id {sid!r}: {names} all map to it, so none is graded (fix the names or the "
                        f"manifest)"
                    ),
                )
            claimed = (sid, tuple(p.name for p in paths)) if len(paths) > 1 else None
            entries.append(Entry(sid if n == 1 else f"{sid}-dup{n}", path, kind, error, claimed))
    return entries
