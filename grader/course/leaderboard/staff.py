"""The staff page: every student with something to look at, by id, with the reasons; never published."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grader.course.leaderboard.data import FORMAT_VERSION
from grader.course.leaderboard.inputs import LeaderboardError
from grader.course.leaderboard.names import display_names
from grader.course.leaderboard.ranking import Selection
from grader.course.leaderboard.render import fmt_points, fmt_when, templates
from grader.engine.records import flags
from grader.engine.records.files import write_atomic

STAFF_TEMPLATE = "leaderboard_staff.html.j2"


def build_staff_data(
    selection: Selection, public: dict[str, Any], salt: str | None, names: dict[str, str]
) -> dict[str, Any]:
    """The staff page: every student with something to look at, by id and shown name, with reasons.

    Never published: it names students next to the reasons (a failed kernel check, flagged timing,
    a speed to review, scan findings), which the public page keeps off.
    """
    chosen = selection.ranked + selection.flagged
    shown = display_names(
        [e.student for e in chosen] + selection.failed,
        salt if salt is not None else public["assignment"]["name"],
        names,
    )
    rows = []
    for entry in sorted(chosen, key=lambda e: e.student):
        found = flags.of(entry.result)
        if not found:
            continue
        rows.append(
            {
                "student": entry.student,
                "name": shown[entry.student],
                "ranked": entry in selection.ranked,
                "score": entry.result.score,
                "max_score": entry.result.max_score,
                "flags": [{"kind": f.kind, "problem": f.problem, "detail": f.detail} for f in found],
                "path": str(entry.path),
                "graded_at": entry.result.graded_at,
            }
        )
    return {
        "format": FORMAT_VERSION,
        "title": f"{public['title']}: staff page (do not publish)",
        "assignment": public["assignment"],
        "built_at": public["built_at"],
        "rows": rows,
        "not_graded": [{"student": s, "name": shown[s]} for s in selection.failed],
    }


def write_staff(staff: dict[str, Any], out: Path) -> None:
    """The staff page: staff.json and index.html in their own folder, apart from the public site."""
    if out.exists() and not out.is_dir():
        raise LeaderboardError(f"{out}: exists and is not a folder")
    env = templates()
    env.filters.update(pts=fmt_points, when=fmt_when)
    write_atomic(out / "staff.json", json.dumps(staff, indent=2, ensure_ascii=False) + "\n")
    write_atomic(out / "index.html", env.get_template(STAFF_TEMPLATE).render(d=staff))


def staff_folder(out: Path) -> Path:
    """Where the staff page goes by default: beside the public site, never inside it."""
    return out.resolve().parent / f"{out.resolve().name}-staff"
