"""A batch's gradebook.csv and summary.json: one row per student, safe to open in a spreadsheet.

Rules a TA relies on when pasting the gradebook into an LMS:
- a student who could not be graded has empty score cells (never 0.0: a zero is a verdict), the
  reason in the `error` column, and `status` = error;
- the `flags` column says what a person should look at (a failed kernel check, flagged timing,
  a speed to review, static-scan findings), so "caught" and "broken" never read alike;
- no cell can start a formula: text beginning with `=`, `+`, `-`, `@`, a tab or a carriage
  return is prefixed with an apostrophe (OWASP's advice against CSV injection).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from grader.engine.records import flags
from grader.engine.records.files import write_atomic
from grader.engine.records.model import Result
from grader.engine.records.text import printable

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
MAX_ERROR = 300


def safe_cell(value: Any) -> Any:
    """A cell a spreadsheet shows as text, never evaluates, and a terminal prints as text: numbers pass,
    control characters go, risky text gets a `'`."""
    if not isinstance(value, str):
        return value
    value = printable(value)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def write_csv(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Any CSV the grader writes: header, rows, every cell neutralised, written atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writerow({c: safe_cell(c) for c in columns})
    for row in rows:
        writer.writerow({c: safe_cell(row.get(c)) for c in columns})
    write_atomic(path, buf.getvalue())


def one_line(text: str, limit: int = MAX_ERROR) -> str:
    flat = " | ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def columns(problems: list[str]) -> list[str]:
    return ["student", "status", *problems, "total", "max", "not_measured", "flags", "error", "duration_s", "gpu"]


def row(student: str, result: Result | None, problems: list[str], slot: str | None = None) -> dict[str, Any]:
    """One gradebook line; `slot` is the GPU index the student was graded on in this run, if any.

    Score cells are None (an empty cell, JSON null) unless the submission was graded.
    """
    if result is None:
        line: dict[str, Any] = {"student": student, "status": "missing", **{p: None for p in problems}}
        line.update(
            total=None,
            max=None,
            not_measured="",
            flags="",
            error="not graded yet (the batch was interrupted or is still running)",
            duration_s=None,
            gpu="",
        )
        return line
    graded = result.status == "graded"
    scores = {p.name: round(p.score, 2) for p in result.problems}
    line = {"student": student, "status": result.status}
    for name in problems:
        line[name] = scores.get(name) if graded else None
    line.update(
        total=round(result.score, 2) if graded else None,
        max=round(result.max_score, 2),
        not_measured=result.pending_note() if graded else "",
        flags=flags.labels(result) if graded else "",
        error=one_line(error_text(result)),
        duration_s=round(result.duration_s, 1),
        gpu=result.environment.device,
    )
    if slot is not None and "(GPU " not in line["gpu"]:
        line["gpu"] = f"{line['gpu']} (GPU {slot})"
    return line


def summary(rows: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """summary.json: counts, the mean over graded students only, and the rows themselves."""
    totals = [r["total"] for r in rows if r["status"] == "graded" and isinstance(r.get("total"), (int, float))]
    by_flag: dict[str, int] = {}
    for r in rows:
        kinds = {label.split(": ", 1)[-1] for label in str(r.get("flags") or "").split("; ") if label}
        for kind in kinds:
            by_flag[kind] = by_flag.get(kind, 0) + 1
    return {
        **(meta or {}),
        "students": len(rows),
        "graded": sum(r["status"] == "graded" for r in rows),
        "errors": sum(r["status"] == "error" for r in rows),
        "missing": sum(r["status"] == "missing" for r in rows),
        "flagged": sum(bool(r.get("flags")) for r in rows),
        "flags": dict(sorted(by_flag.items())),
        "mean_total": round(sum(totals) / len(totals), 3) if totals else None,
        "rows": rows,
    }


def write(out: Path, rows: list[dict[str, Any]], problems: list[str], meta: dict[str, Any] | None = None) -> None:
    """gradebook.csv and summary.json in `out`."""
    write_csv(out / "gradebook.csv", columns(problems), rows)
    write_atomic(out / "summary.json", json.dumps(summary(rows, meta), indent=2))


def error_text(result: Result) -> str:
    """An error as a TA reads it: one that is the grading's own fault says so (the next run grades it again)."""
    return ("infrastructure: " if result.error_kind == "infrastructure" else "") + result.error
