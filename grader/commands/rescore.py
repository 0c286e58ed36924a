"""`grader rescore GRADES`: stored results re-scored with the spec's current points and thresholds, no kernel run."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.engine.spec.model import DEFAULT_SPEC


def cmd_rescore(args: argparse.Namespace) -> int:
    from grader.course.batch.results import commit_result, read_result, rebuild_gradebook, result_files
    from grader.engine.assignment.load import load_assignment
    from grader.engine.judge.rescore import decide, rescore_result

    console = Console(stderr=True, soft_wrap=True)
    grades = Path(args.grades)
    if not grades.is_dir():
        console.print(
            f"[red]error:[/red] {escape(str(grades))} is not a folder of results (a `grader batch --out` folder)"
        )
        return 2
    assignment = load_assignment(args.spec, hidden=False if args.public_only else None)
    counts = {"rescore": 0, "keep": 0, "regrade": 0, "unreadable": 0}
    for path in result_files(grades):
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
