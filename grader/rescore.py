"""Re-scoring stored results after the spec's points or thresholds changed: no kernel runs.

A result.json keeps every case's verdict and every benchmark shape's timing, so new points,
case weights or thresholds can be applied to it exactly as grading would have. Whether that is
enough is decided by the spec fingerprint (grader/fingerprint.py): the same `grading` hash means
the verdicts still hold; a different one means the submission must be graded again.

`grader rescore GRADES [--spec FILE]` does this on demand; `grader batch` does it by itself when
it resumes over results whose spec changed, and says which students it re-scored or regraded.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from rich.console import Console
from rich.markup import escape

from grader import flags, scoring
from grader.fingerprint import fingerprint, suite_of
from grader.records import Performance, ProblemResult, Result
from grader.spec import DEFAULT_SPEC, Assignment, Problem, load_assignment

Action = Literal["keep", "rescore", "regrade"]


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str = ""


def decide(result: Result, assignment: Assignment) -> Decision:
    """What a stored result needs under `assignment`: nothing, a re-score, or a new grading."""
    if result.status != "graded":
        return Decision("keep")  # a bad archive stays bad whatever the spec says
    names = [p.name for p in result.problems]
    missing = [n for n in names if n not in {p.name for p in assignment.problems}]
    if missing:
        return Decision("regrade", f"the spec no longer has problem(s) {', '.join(missing)}")
    now = fingerprint(assignment, names, suite_of(result.environment.interpreter))
    then = result.assignment.spec
    if then is None:  # an older grader's result: nothing to compare (a new version number regrades it)
        return Decision("keep", "graded before spec fingerprints were recorded")
    if then.grading != now.grading:
        return Decision("regrade", "cases, tolerances or rules changed")
    if then.scoring != now.scoring:
        return Decision("rescore", "only points, case weights or thresholds changed")
    return Decision("keep")


def _performance(problem: Problem, perf: Performance) -> Performance:
    if perf.status in ("measured", "flagged") and perf.shapes:
        from grader import performance  # imports torch and the timing code: only when there are times

        return performance.score(problem, perf.shapes, perf.gpu or "")
    score = None if perf.score is None else 0.0
    return perf.model_copy(update={"max_score": problem.points.performance, "score": score})


def rescore_problem(stored: ProblemResult, problem: Problem, suite: str) -> ProblemResult:
    """One problem's verdicts, scored with `problem`'s points, weights and thresholds."""
    result = stored.model_copy(deep=True)
    cases = {f"{problem.name}: {c.name}": c for c in problem.suite_cases(suite)}
    tests = [t for t in result.tests if t.name in cases]
    scoring.assign_case_points(problem, [cases[t.name] for t in tests], tests, cheat=flags.kernel_check_failure(result))
    if result.performance is not None:
        result.performance = _performance(problem, result.performance)
    result.max_score = problem.max_score
    return scoring.finish_problem(result, fatal=stored.status == "error")


def rescore_result(stored: Result, assignment: Assignment) -> Result:
    """The whole result under `assignment`'s scoring, with a note that says it was re-scored."""
    suite = suite_of(stored.environment.interpreter)
    problems = [rescore_problem(p, assignment.problem(p.name), suite) for p in stored.problems]
    names = [p.name for p in problems]
    result = stored.model_copy(deep=True)
    result.problems = problems
    result.score = round(sum(p.score for p in problems), 4)
    result.max_score = sum(p.max_score for p in problems)
    result.pending_score = round(
        sum(p.performance.max_score for p in problems if p.performance and p.performance.status == "not_measured"), 4
    )
    result.assignment.spec = fingerprint(assignment, names, suite)
    when = datetime.now(UTC).isoformat(timespec="seconds")
    note = (
        f"re-scored on {when} from the stored case results after the spec's points or thresholds changed (no "
        f"kernel ran)"
    )
    result.warnings = [w for w in result.warnings if not w.startswith("re-scored on ")] + [note]
    return result


# -- the command ---------------------------------------------------------------------------------


def _results(grades: Path) -> list[Path]:
    return sorted(p for p in grades.glob("*/result.json") if not p.parent.name.startswith("."))


def rebuild_gradebook(grades: Path) -> bool:
    """Rewrite gradebook.csv and summary.json from the result files, if this is a batch folder."""
    from grader import gradebook
    from grader.batch import read_result

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
    results = {p.parent.name: read_result(p) for p in _results(grades)}
    names = list(meta.get("problems") or dict.fromkeys(n.name for r in results.values() if r for n in r.problems))
    rows = [gradebook.row(student, result, names) for student, result in results.items()]
    meta["rescored_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    gradebook.write(grades, rows, names, meta)
    return True


def cmd_rescore(args: argparse.Namespace) -> int:
    from grader.batch import commit_result, read_result

    console = Console(stderr=True, soft_wrap=True)
    grades = Path(args.grades)
    if not grades.is_dir():
        console.print(
            f"[red]error:[/red] {escape(str(grades))} is not a folder of results (a `grader batch --out` folder)"
        )
        return 2
    assignment = load_assignment(args.spec, hidden=False if args.public_only else None)
    counts = {"rescore": 0, "keep": 0, "regrade": 0, "unreadable": 0}
    for path in _results(grades):
        stored = read_result(path)
        if stored is None:
            counts["unreadable"] += 1
            console.print(f"[yellow]skipped[/yellow] {escape(str(path))}: not a valid result.json")
            continue
        decision = decide(stored, assignment)
        if decision.action == "regrade":
            counts["regrade"] += 1
            console.print(
                f"[yellow]not re-scored[/yellow] {escape(path.parent.name)}: {escape(decision.reason)}; grade "
                f"it again (`grader batch` does so when it resumes)"
            )
            continue
        if decision.action == "rescore":
            commit_result(rescore_result(stored, assignment), path.parent)
        counts[decision.action] += 1
    rebuilt = rebuild_gradebook(grades)
    console.print(
        f"re-scored {counts['rescore']} result(s) whose points or thresholds changed, {counts['keep']} unchanged; "
        f"{counts['regrade']} need grading again, {counts['unreadable']} unreadable"
        + (f"; rewrote {escape(str(grades / 'gradebook.csv'))} and summary.json" if rebuilt else "")
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "rescore",
        help="re-score stored results with the spec's current points and thresholds (no kernel runs)",
        description="Apply the spec's points, case weights and thresholds to every GRADES/<student>/result.json "
        "and rewrite "
        "its report, Gradescope file, and the gradebook. Results whose cases, tolerances or rules changed are "
        "listed, not touched.",
    )
    p.add_argument("grades", help="a `grader batch --out` folder")
    p.add_argument(
        "--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (hidden_cases.toml beside it is merged)"
    )
    p.add_argument("--public-only", action="store_true", help="the results were graded with --public-only")
    p.set_defaults(func=cmd_rescore)


# -- resuming a batch ----------------------------------------------------------------------------


@dataclass
class ResumeChanges:
    """What a resumed batch did with stored results whose spec changed: it says so at the end."""

    assignment: Assignment
    rescored: list[str]
    regraded: dict[str, str]

    @classmethod
    def under(cls, assignment: Assignment) -> ResumeChanges:
        return cls(assignment, [], {})

    def settle(
        self, student: str, stored: Result | None, out: Path, commit: Callable[[Result, Path], None]
    ) -> Result | None:
        """The stored result to keep (re-scored and committed if needed), or None to grade again."""
        if stored is None:
            return None
        decision = decide(stored, self.assignment)
        if decision.action == "regrade":
            self.regraded[student] = decision.reason
            return None
        if decision.action == "rescore":
            stored = rescore_result(stored, self.assignment)
            commit(stored, out)
            self.rescored.append(student)
        return stored

    def as_meta(self) -> dict[str, object]:
        return {"rescored": self.rescored, "regraded": self.regraded}

    def lines(self) -> list[str]:
        out = []
        if self.rescored:
            out.append(
                f"the spec's points or thresholds changed: re-scored {len(self.rescored)} stored result(s) "
                f"without running them ({', '.join(self.rescored[:10])}{' …' if len(self.rescored) > 10 else ''})"
            )
        if self.regraded:
            reasons = sorted(set(self.regraded.values()))
            out.append(
                f"the spec's cases or rules changed ({'; '.join(reasons)}): graded {len(self.regraded)} "
                f"student(s) again"
            )
        return out
