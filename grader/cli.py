"""`grader`: the command line of the grading engine.

Each command lives in the module that implements it, which registers it with `add_parser(sub)`
(its parser, options and `func`); COMMANDS lists them in the order `grader --help` shows.

Exit codes: 0 whenever a grade was produced (whatever the submission did), 2 when grading itself
could not run (a bad path, a bad spec, no GPU when one was required).
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from rich.console import Console
from rich.markup import escape

from grader import (
    export,
    grade_command,
    gradescope_autograder,
    image_command,
    kernel_cache,
    pack,
    reference_cache,
    rescore,
    writeup,
)
from grader.batch import command as batch_command
from grader.leaderboard import command as leaderboard_command
from grader.spec import SpecError

console = Console(stderr=True)

COMMANDS: tuple[ModuleType, ...] = (
    grade_command,
    batch_command,
    image_command,
    rescore,
    writeup,
    pack,
    gradescope_autograder,
    export,
    kernel_cache,
    leaderboard_command,
    reference_cache,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grader", description="Grade Triton kernel submissions against the assignment spec."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")  # locations such as problems[<name>] are not markup
        return 2
    except (RuntimeError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
