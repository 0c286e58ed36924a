"""`grader leaderboard`'s work: read results, choose and rank, write the public site and the staff page."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from grader.course.leaderboard.data import build_data
from grader.course.leaderboard.inputs import LeaderboardError, Warn, find_result_files, load_entries, load_names
from grader.course.leaderboard.ranking import select
from grader.course.leaderboard.render import write_site
from grader.course.leaderboard.staff import build_staff_data, staff_folder, write_staff


def _build_time() -> datetime:
    """Now, or SOURCE_DATE_EPOCH when set, so a rebuild of the same results is byte-identical."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), tz=timezone.utc)
    return datetime.now(timezone.utc)


def build_site(
    paths: Sequence[Path],
    out: Path,
    *,
    title: str | None = None,
    names_file: Path | None = None,
    salt: str | None = None,
    built_at: datetime | None = None,
    warn: Warn = lambda message: None,
    staff_out: Path | None = None,
) -> dict[str, Any]:
    """Read results, choose and rank, write SITE/index.html and SITE/leaderboard.json; returns the data."""
    names = load_names(names_file) if names_file is not None else {}
    files = find_result_files(paths)
    if not files:
        raise LeaderboardError(f"no result.json found under {', '.join(str(p) for p in paths)}")
    entries = load_entries(files, warn)
    if not entries:
        raise LeaderboardError(
            f"no valid result.json among {len(files)} file(s) under {', '.join(str(p) for p in paths)}"
        )
    assignments = sorted({e.result.assignment.name for e in entries})
    if len(assignments) > 1:
        raise LeaderboardError(
            f"results from several assignments ({', '.join(assignments)}): build one leaderboard per assignment"
        )
    selection = select(entries, warn)
    versions = sorted(
        {e.result.assignment.version for e in selection.ranked + selection.flagged}
        or {e.result.assignment.version for e in entries}
    )
    if len(versions) > 1:
        warn(f"results graded under several assignment versions: {', '.join(versions)}")
    unknown = sorted(set(names) - {e.student for e in entries})
    if unknown:
        warn(f"{names_file}: {len(unknown)} name(s) match no student in the results (e.g. {unknown[0]})")
    data = build_data(
        selection,
        assignment=assignments[0],
        versions=versions,
        title=title,
        salt=salt,
        names=names,
        built_at=built_at or _build_time(),
    )
    write_site(data, out)
    staff = staff_out or staff_folder(out)
    if staff.resolve() == out.resolve() or out.resolve() in staff.resolve().parents:
        raise LeaderboardError(f"{staff}: the staff page must not be inside the published site {out}")
    write_staff(build_staff_data(selection, data, salt, names), staff)
    return data
