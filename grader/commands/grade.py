"""`grader grade`: one submission folder graded into result.json, report.html and gradescope/."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from grader.engine.orchestrator import launch
from grader.engine.spec import toml
from grader.engine.spec.model import DEFAULT_SPEC

console = Console(stderr=True)


def module_names(spec: Path = DEFAULT_SPEC) -> str:
    """The files a submission holds, as the spec names them, read without validating it (help text)."""
    try:
        problems = toml.loads(spec.read_text(encoding="utf-8"))["problems"]
        return ", ".join(f"{p['module']}.py" for p in problems)
    except (OSError, ValueError, KeyError, TypeError):
        return "a .py file per problem of the assignment"


def add_parser(sub: Any) -> None:
    g = sub.add_parser("grade", help="grade one submission folder")
    g.add_argument("path", help=f"submission folder ({module_names()})")
    g.add_argument("--out", default="grades/single", help="folder for result.json, report.html, gradescope/")
    launch.add_arguments(g)
    # everything it starts has ended when run() returns (grade()'s scope), and what it wrote is closed
    g.set_defaults(func=run, leaves_at_once=True)


def run(args: argparse.Namespace) -> int:
    from grader.engine.assignment.load import load_assignment
    from grader.engine.orchestrator.grade import grade
    from grader.engine.orchestrator.options import options_for
    from grader.engine.records.console import print_profiles, print_result
    from grader.engine.records.report import write_result

    submission = Path(args.path)
    if not submission.is_dir():
        console.print(
            f"[red]error:[/red] {escape(str(submission))} is not a folder (expected a submission folder with "
            f"{module_names(args.spec)})"
        )
        return 2
    assignment = load_assignment(args.spec, hidden=False if args.public_only else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    hide = launch.hidden_paths(args.spec, out) + ([Path(args.secret_file)] if args.secret_file else [])
    options = options_for(launch.GradeCommand.from_args(args, hide))
    with console.status(f"grading {submission}") as status:
        options.progress = lambda text: status.update(f"grading {submission}: {text}")
        options.events = lambda event: console.print(escape(event.line()), highlight=False, soft_wrap=True)
        result = grade(assignment, submission, options)
    write_result(result, out)
    print_result(result, Console())
    if options.profile:
        if options.device != "cpu" and any(p.profile for p in result.problems):
            print_profiles(result, Console())
        else:
            console.print("--profile: nothing profiled (profiles need a CUDA GPU and a problem whose tests pass)")
    console.print(f"wrote {out / 'result.json'}, {out / 'report.html'}, {out / 'gradescope' / 'results.json'}")
    return 0
