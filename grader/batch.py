"""Grading a whole class: one result folder per student, a gradebook, a summary.

Resumable: a student whose result.json already records the same content hash and assignment
version is skipped unless --regrade. Each student's files are written atomically, so a batch
killed at any moment and started again grades only what is missing.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.progress import Progress

from grader.orchestrator import grade, submission_hash
from grader.records import Result
from grader.report import write_atomic, write_result
from grader.spec import Assignment, load_assignment
from grader.summary import batch_table


def discover(root: Path) -> list[tuple[str, Path]]:
    """(student id, submission folder) for each folder entry of `root`."""
    if not root.is_dir():
        raise OSError(f"{root} is not a folder of submissions")
    return sorted((p.name, p) for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def previous(out: Path, sha: str, assignment: Assignment) -> Result | None:
    path = out / "result.json"
    if not path.exists():
        return None
    try:
        old = Result.model_validate_json(path.read_text())
    except ValueError:
        return None
    same = old.submission.sha256 == sha and old.assignment.version == assignment.assignment.version
    return old if same and old.status == "graded" else None


def gradebook_row(student: str, result: Result) -> dict[str, Any]:
    row: dict[str, Any] = {"student": student, "status": result.status}
    for p in result.problems:
        row[p.name] = round(p.score, 2)
    row.update(total=round(result.score, 2), max=round(result.max_score, 2), error=result.error, duration_s=round(result.duration_s, 1), gpu=result.environment.device)
    return row


def write_gradebook(out: Path, rows: list[dict[str, Any]], problems: list[str]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=["student", "status", *problems, "total", "max", "error", "duration_s", "gpu"])
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(out / "gradebook.csv", buf.getvalue())
    summary = {
        "students": len(rows),
        "graded": sum(r["status"] == "graded" for r in rows),
        "errors": sum(r["status"] != "graded" for r in rows),
        "mean_total": round(sum(r["total"] for r in rows) / len(rows), 3) if rows else 0.0,
        "rows": rows,
    }
    write_atomic(out / "summary.json", json.dumps(summary, indent=2))


def run_batch(args: argparse.Namespace, make_options: Callable[..., Any], hidden_paths: Callable[..., list[Path]]) -> int:
    console = Console()
    assignment = load_assignment(args.spec, hidden=False if args.public_only else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.submissions)
    entries = discover(root)
    options = make_options(args, hidden_paths(args.spec, out) + [root.resolve()])
    problems = [p.name for p in assignment.problems]
    rows = []
    with Progress(console=console) as progress:
        task = progress.add_task("grading", total=len(entries))
        for student, path in entries:
            progress.update(task, description=f"grading {student}")
            student_out = out / student
            result = None if args.regrade else previous(student_out, submission_hash(path), assignment)
            if result is None:
                options.student = student
                result = grade(assignment, path, options)
                write_result(result, student_out)
            rows.append(gradebook_row(student, result))
            progress.advance(task)
    write_gradebook(out, rows, problems)
    console.print(batch_table(rows, problems))
    console.print(f"wrote {out / 'gradebook.csv'} and {out / 'summary.json'}")
    return 0
