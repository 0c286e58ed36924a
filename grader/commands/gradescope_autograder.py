"""`grader gradescope-autograder --out DIR`: autograder.zip for Gradescope, and the entry point run_autograder calls."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.spec.model import DEFAULT_SPEC


def cmd_build(args: argparse.Namespace) -> int:
    from grader.course.gradescope_package import build_zip

    console = Console(stderr=True, soft_wrap=True)
    target = build_zip(Path(args.out), Path(args.spec), args.public_only)
    console.print(
        f"wrote {escape(str(target))}: upload it as the assignment's autograder (Gradescope: Configure "
        f"Autograder, zip file). "
        "It grades correctness on the CPU cases; GPU grades go in through Gradescope's CSV score import from "
        "gradebook.csv."
    )
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
    p.set_defaults(func=cmd_build)


def main(argv: list[str] | None = None) -> int:
    """The entry point run_autograder calls inside Gradescope's container."""
    parser = argparse.ArgumentParser(prog="python -m grader.commands.gradescope_autograder")
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--metadata", type=Path, required=True)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--problems", default=None)
    args = parser.parse_args(argv)
    from grader.course.gradescope_package import run

    os.environ.pop("GRADER_SECRET", None)  # the secret comes from its file, which workers cannot read
    return run(
        args.source, args.submission, args.metadata, args.results, args.problems.split(",") if args.problems else None
    )


if __name__ == "__main__":
    raise SystemExit(main())
