"""Result records on disk: reading one back, deciding whether it still stands, writing a whole set.

Every file is written atomically and result.json last, so its presence marks a complete set; a
student whose record is for this very grading is skipped, and whatever a run left behind is
checked before it is trusted.
"""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError

from grader.course.batch.tasks import Task
from grader.course.leaderboard.names import leaderboard_alias
from grader.engine.records import gradebook
from grader.engine.records.files import write_atomic
from grader.engine.records.model import AssignmentRef, ErrorKind, ProblemResult, Result, RunEnvironment, SubmissionRef
from grader.engine.records.report import gradescope_json, render_html
from grader.engine.spec.model import Assignment, Problem

MAX_RESULT_BYTES = 32 << 20


class BadResult(Exception):
    """What a grading run left behind is not a usable result; the message says why."""


def read_result(path: Path) -> Result | None:
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return None
        return Result.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def previous(
    out: Path, sha: str, assignment: Assignment, problems: list[str], interpreter: bool, retry_errors: bool = False
) -> Result | None:
    """The result already in `out` when it is for this very grading, else None.

    Same content hash, assignment version, set of problems and device kind (interpreter or
    GPU). A "graded" result counts, and so does an error the submission caused (a bad archive, a
    hang); an infrastructure error does not, nor any error with `retry_errors`.
    """
    old = read_result(out / "result.json")
    if old is None:
        return None
    same = (
        old.submission.sha256 == sha
        and old.assignment.version == assignment.assignment.version
        and old.assignment.name == assignment.assignment.name
        and sorted(p.name for p in old.problems) == sorted(problems)
        and old.environment.interpreter == interpreter
    )
    if not same:
        return None
    # an error that says nothing about the submission (the engine died, the grader broke) is graded again
    if old.status == "error" and (retry_errors or old.error_kind == "infrastructure"):
        return None
    if not (out / "report.html").exists() or not (out / "gradescope" / "results.json").exists():
        commit_result(old, out)  # killed between files: the record is whole, re-render the rest
    return old


def commit_result(result: Result, out: Path) -> None:
    """report.html and gradescope/results.json, then result.json: its presence marks a whole set."""
    write_atomic(
        out / "report.html", render_html(result, leaderboard_alias(result.submission.student, result.assignment.name))
    )
    write_atomic(out / "gradescope" / "results.json", gradescope_json(result))
    write_atomic(out / "result.json", result.model_dump_json(indent=2))


def remove_partial_files(out: Path) -> int:
    """Temporary files a killed run left behind (write_atomic's `.name.XXXX.tmp`)."""
    removed = 0
    for tmp in list(out.glob(".*.tmp")) + list(out.glob("gradescope/.*.tmp")):
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed


def error_result(
    assignment: Assignment,
    task: Task,
    reason: str,
    problems: list[Problem],
    device: str,
    isolation: str,
    duration: float = 0.0,
    kind: ErrorKind = "submission",
) -> Result:
    """A complete record for a submission that could not be graded, so the gradebook stays whole."""
    short = reason.strip().splitlines()[0] if reason.strip() else "error"
    return Result(
        assignment=AssignmentRef(name=assignment.assignment.name, version=assignment.assignment.version),
        submission=SubmissionRef(path=str(task.entry.source), sha256=task.sha, student=task.student),
        environment=RunEnvironment(
            device=device,
            torch="",
            triton="",
            python=platform.python_version(),
            isolation=isolation,
            interpreter=device == "cpu",
        ),
        score=0.0,
        max_score=sum(p.max_score for p in problems),
        duration_s=round(duration, 3),
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="error",
        error=reason.strip()[:4000],
        error_kind=kind,
        problems=[
            ProblemResult(
                name=p.name, title=p.title, score=0.0, max_score=p.max_score, status="error", message=short[:500]
            )
            for p in problems
        ],
        flags=[],  # nothing graded: nothing to look at but the error, which the row shows
    )


def collect_result(out: Path, task: Task, assignment: Assignment) -> Result:
    """The result.json a grading run wrote into `out`, checked; BadResult says what is wrong."""
    path = out / "result.json"
    if not path.is_file():
        raise BadResult("it wrote no result.json")
    if path.stat().st_size > MAX_RESULT_BYTES:
        raise BadResult(f"its result.json is over {MAX_RESULT_BYTES >> 20} MiB")
    try:
        result = Result.model_validate_json(path.read_bytes())
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:300]
        raise BadResult(f"its result.json is not a valid result record ({first})") from None
    if (result.assignment.name, result.assignment.version) != (
        assignment.assignment.name,
        assignment.assignment.version,
    ):
        raise BadResult(
            f"it graded assignment {result.assignment.name} {result.assignment.version}, not "
            f"{assignment.assignment.name} "
            f"{assignment.assignment.version} (is the image out of date? `grader image build`)"
        )
    if result.submission.sha256 != task.sha:
        raise BadResult("the files it graded differ from the submission (content hash mismatch)")
    result.submission.path = str(task.entry.source)
    result.submission.student = task.student
    return result


def result_files(grades: Path) -> list[Path]:
    """Every GRADES/<student>/result.json, leaving out the batch's own dot-folders."""
    return sorted(p for p in grades.glob("*/result.json") if not p.parent.name.startswith("."))


def rebuild_gradebook(grades: Path) -> bool:
    """Rewrite gradebook.csv and summary.json from the result files, if this is a batch folder."""
    summary_path = grades / "summary.json"
    if not summary_path.is_file():
        return False
    try:
        meta = json.loads(summary_path.read_text(encoding="utf-8"))
    except ValueError:
        meta = {}
    meta = {
        k: v
        for k, v in meta.items()
        if k not in ("students", "graded", "errors", "missing", "flagged", "flags", "mean_total", "rows")
    }
    results = {p.parent.name: read_result(p) for p in result_files(grades)}
    names = list(meta.get("problems") or dict.fromkeys(n.name for r in results.values() if r for n in r.problems))
    rows = [gradebook.row(student, result, names) for student, result in results.items()]
    meta["rescored_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    gradebook.write(grades, rows, names, meta)
    return True


#: what a problem's `contended` says it ran out of
_RAN_OUT = {"time_limit": "its time limit", "out_of_memory": "GPU memory"}


def contention(result: Result) -> list[str]:
    """What the result's problems ran out of that other gradings beside it may have caused."""
    return [f"{p.name} ran out of {_RAN_OUT[p.contended]}" for p in result.problems if p.contended]


def alone_note(why: list[str]) -> str:
    """The warning on the result of a grading made again alone (`grader batch`, `grader serve`)."""
    return f"graded again alone: {'; '.join(why)} beside other gradings (this is the grading alone)"
