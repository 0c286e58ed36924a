"""GPU grades into Gradescope: `grader batch`'s records, carried in the autograder zip, merged per run.

Gradescope's machines have no GPU, and a Gradescope score comes only from what run_autograder
writes into results.json (its leaderboard too: "your autograder must export a top-level
"leaderboard" section in the results.json output", gradescope-autograders.readthedocs.io,
leaderboards). So the GPU grades travel the one way Gradescope documents for changing an
autograder's results: the staff build the zip again with the batch's records in it, upload it
("Update Autograder", base_images page), and press "Regrade All Submissions", which "rerun[s]
your autograder on all existing active submissions" (best_practices page). Each run then finds
its student's GPU record by the submission metadata's email or SID, checks that it graded the
very files being graded now (the content hash), and takes that record's performance: points,
speedups and the leaderboard entries (re-scored by grader.engine.judge.rescore.with_gpu_performance).
Correctness stays this run's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from grader.engine.records.model import Result

GPU_GRADES_NAME = "gpu_grades.json"


class GpuGrades(BaseModel):
    """What the zip carries: the GPU-graded records of one assignment version."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = 1
    assignment_version: str
    grades: list[Result]


class GpuMatch(BaseModel):
    """The GPU record for this run's student, if any, and what the student is told about it."""

    record: Result | None = None
    note: str


def collect(grades_dir: Path, assignment_version: str) -> GpuGrades:
    """Every GPU-graded record under a `grader batch --out` folder (one `<student>/result.json` each)."""
    grades = []
    for path in sorted(grades_dir.glob("*/result.json")):
        try:
            result = Result.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        gpu = not result.environment.interpreter and result.environment.device != "cpu"
        if result.status == "graded" and gpu and result.submission.student:
            if result.assignment.version == assignment_version:
                grades.append(result)
    return GpuGrades(assignment_version=assignment_version, grades=grades)


def identities(users: list[Any]) -> set[str]:
    """What the submitters are known by: each one's SID, email, and the email's local part."""
    found: set[str] = set()
    for user in users:
        if not isinstance(user, dict):
            continue
        for key in ("sid", ":sid", "email", ":email"):
            value = user.get(key)
            if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
                text = str(value).strip().lower()
                found.add(text)
                if "@" in text:
                    found.add(text.split("@")[0])
    return found


def _members(student: str) -> set[str]:
    return {part.strip().lower() for part in student.split("+") if part.strip()}


def match(grades: GpuGrades | None, users: list[Any], sha256: str) -> GpuMatch:
    """This submission's GPU record: same student (email or SID) and same files (content hash)."""
    pending = (
        "Performance points are measured only on the course's GPUs, not here: they are pending (neither zero nor "
        "full) until the course staff bring in the GPU grading and regrade; then they, your speedups and "
        "Gradescope's leaderboard appear here."
    )
    if grades is None:
        return GpuMatch(note=pending)
    who = identities(users)
    mine = [g for g in grades.grades if g.submission.student and _members(g.submission.student) & who]
    same = [g for g in mine if g.submission.sha256 == sha256]
    if same:
        record = same[-1]
        return GpuMatch(
            record=record,
            note=f"Performance points come from the course's GPU grading of these same files "
            f"({record.environment.device}, graded {record.graded_at}).",
        )
    if mine:
        return GpuMatch(
            note="The course's GPU grading graded other files of yours (another submission), so its performance "
            "points do not apply to this one: they stay pending. " + pending
        )
    return GpuMatch(note=pending)
