"""Reading the grader's results for the leaderboard: result.json files and the display names file."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from grader.engine.records.model import SCHEMA_VERSION, Result

Warn = Callable[[str], None]


class LeaderboardError(Exception):
    """Bad input the site cannot be built from; the message names the file or path."""


@dataclass(frozen=True)
class Entry:
    """One parsed result.json and the student it belongs to."""

    path: Path
    result: Result
    student: str


def find_result_files(paths: Sequence[Path]) -> list[Path]:
    """result.json files named directly or found under folders (recursively), each once."""
    found: dict[Path, None] = {}
    for path in paths:
        if path.is_file():
            found.setdefault(path.resolve())
        elif path.is_dir():
            for hit in sorted(path.rglob("result.json")):
                if hit.is_file() and not any(part.startswith(".") for part in hit.relative_to(path).parts):
                    found.setdefault(hit.resolve())
        else:
            raise LeaderboardError(f"{path}: no such file or folder")
    return list(found)


def load_entries(files: Iterable[Path], warn: Warn) -> list[Entry]:
    """Parse each file; a malformed one is skipped with a warning that names it."""
    entries = []
    for path in files:
        try:
            result = Result.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "file"
            warn(
                f"skipped {path}: not a valid result.json ({where}: {first.get('msg', 'invalid')}; "
                f"{exc.error_count()} error(s))"
            )
            continue
        except (OSError, UnicodeDecodeError) as exc:
            warn(f"skipped {path}: cannot read it ({exc})")
            continue
        if result.schema_version > SCHEMA_VERSION:
            warn(
                f"{path}: result schema version {result.schema_version} is newer than this grader's "
                f"({SCHEMA_VERSION}); read as version {SCHEMA_VERSION}"
            )
        student = result.submission.student or path.parent.name
        entries.append(Entry(path=path, result=result, student=student))
    return entries


def load_names(path: Path) -> dict[str, str]:
    """Display names: a CSV `student,display_name` (header optional) or a JSON object."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise LeaderboardError(f"{path}: cannot read the names file ({exc})") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LeaderboardError(f"{path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
            raise LeaderboardError(f"{path}: expected a JSON object mapping student id to display name (strings)")
        names = {k.strip(): v.strip() for k, v in data.items()}
    else:
        names = {}
        for line, row in enumerate(csv.reader(text.splitlines()), start=1):
            if not row or all(not cell.strip() for cell in row):
                continue
            if line == 1 and [c.strip().lower() for c in row[:2]] == ["student", "display_name"]:
                continue
            if len(row) < 2 or not row[0].strip() or not row[1].strip():
                raise LeaderboardError(f"{path}:{line}: expected 'student,display_name', got {','.join(row)!r}")
            names[row[0].strip()] = row[1].strip()
    empty = [k for k, v in names.items() if not k or not v]
    if empty:
        raise LeaderboardError(f"{path}: empty student id or display name for {empty[0]!r}")
    return names
