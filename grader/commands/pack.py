"""`grader pack SUBMISSION --out FILE`: the public tests run, then the archive a student uploads."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.engine.spec.model import DEFAULT_SPEC


def cmd_pack(args: argparse.Namespace) -> int:
    from grader.course.pack import PackError, build_archive, run_public_tests
    from grader.engine.assignment.load import load_assignment

    console = Console(stderr=True, soft_wrap=True)
    folder = Path(args.submission)
    spec = load_assignment(args.spec, hidden=False)
    chosen = [p for p in spec.problems if not args.problems or p.name in args.problems.split(",")]
    modules = [p.module for p in spec.problems]
    if not args.no_tests:
        with console.status(f"running the public tests on {folder} (pytest handout)"):
            run = run_public_tests(folder, [p.name for p in chosen])
        if run.passed:
            console.print(f"[green]public tests passed:[/green] {escape(run.summary)}")
        else:
            console.print(
                f"[yellow]public tests did not all pass:[/yellow] {escape(run.summary)} (run `pytest handout "
                f"--submission {escape(str(folder))}` for details; the archive is built anyway)"
            )
    try:
        names = build_archive(folder, Path(args.out), modules)
    except (PackError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    console.print(
        f"wrote {escape(args.out)} ({len(names)} file(s): {escape(', '.join(names))}); it unpacks as the "
        f"grader's batch expects: upload it"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pack", help="run the public tests and build the archive to upload (.tar.gz)")
    p.add_argument(
        "submission", nargs="?", default="student_template", help="your submission folder (default: student_template)"
    )
    p.add_argument("--out", default="submission.tar.gz", help="the archive to write (default: submission.tar.gz)")
    p.add_argument("--problems", default=None, help="comma-separated problems whose public tests to run (default: all)")
    p.add_argument("--no-tests", action="store_true", help="build the archive without running the public tests")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml")
    p.set_defaults(func=cmd_pack)
