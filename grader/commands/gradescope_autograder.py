"""`grader gradescope-autograder --out DIR`: autograder.zip for Gradescope, and the entry point run_autograder calls."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from grader.engine.spec.model import DEFAULT_SPEC


def cmd_build(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from grader.course.gradescope_package import TESTED_ON, build_zip

    console = Console(stderr=True, soft_wrap=True)
    target = build_zip(Path(args.out), Path(args.spec), args.public_only, args.gpu_grades, args.time_budget)
    gpu = (
        f"with the GPU grades of {escape(str(args.gpu_grades))}: upload it (Configure Autograder, Update "
        "Autograder), then Manage Submissions, Regrade All Submissions"
        if args.gpu_grades
        else "correctness on Gradescope's CPU machines; performance is pending until you build it again with "
        "--gpu-grades GRADES (a `grader batch --out` folder)"
    )
    console.print(f"wrote {escape(str(target))}: {gpu}.\nTested on: {TESTED_ON}.")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "gradescope-autograder", help="build Gradescope's autograder zip (correctness on its CPU machines)"
    )
    p.add_argument("--out", required=True, help="folder for autograder.zip")
    p.add_argument(
        "--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (hidden_cases.toml beside it goes in too)"
    )
    p.add_argument("--public-only", action="store_true", help="leave the hidden cases out of the zip")
    p.add_argument(
        "--gpu-grades",
        type=Path,
        default=None,
        metavar="GRADES",
        help="a `grader batch --out` folder: its GPU grades go in, matched per run by email or SID and content hash",
    )
    p.add_argument(
        "--time-budget",
        type=int,
        default=540,
        metavar="S",
        help="seconds run_autograder grades before it stops and says so (Gradescope's default timeout is 600)",
    )
    p.set_defaults(func=cmd_build)


def _not_graded_without_the_grader(results: Path, reason: str) -> None:
    """results.json when the grader itself does not import: the json module only."""
    results.parent.mkdir(parents=True, exist_ok=True)
    text = (
        "NOT GRADED: your submission could not be graded, so the score above is not a grade.\n"
        f"Reason: the autograder could not start ({reason}). This is a problem on the course's side, not in "
        "your code: please tell the course staff."
    )
    data = {"score": 0.0, "output": text, "extra_data": {"status": "error", "failure": "grader_failed"}, "tests": []}
    results.write_text(json.dumps(data, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    """The entry point run_autograder calls inside Gradescope's container."""
    parser = argparse.ArgumentParser(prog="python -m grader.commands.gradescope_autograder")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--metadata", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--problems", default=None)
    args = parser.parse_args(argv)
    os.environ.pop("GRADER_SECRET", None)  # the secret is drawn per run, in this process only
    try:
        from grader.course.gradescope_run import run
    except Exception as exc:
        _not_graded_without_the_grader(args.results, f"{type(exc).__name__}: {exc}")
        return 0
    problems = args.problems.split(",") if args.problems else None
    return run(args.source, args.submission, args.metadata, args.results, problems)


if __name__ == "__main__":
    raise SystemExit(main())
