"""`grader`: the command line of the grading engine.

Each verb is a module of grader/commands/ that registers it with `add_parser(sub)` (its parser,
options and `func`) and imports what implements it only when it runs, so `grader --help` loads
no torch.

Exit codes: 0 whenever a grade was produced (whatever the submission did), 2 when grading itself
could not run (a bad path, a bad spec, no GPU when one was required).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from types import ModuleType
from typing import NoReturn

from rich.console import Console
from rich.markup import escape

from grader.commands import (
    batch,
    export_handout,
    grade,
    gradescope_autograder,
    image,
    kernel_cache,
    leaderboard,
    pack,
    reference_cache,
    rescore,
    serve,
    submissions,
    submit,
    tokens,
    writeup,
)
from grader.engine.sandbox import bytecode
from grader.engine.spec.model import SpecError

console = Console(stderr=True)

#: in the order `grader --help` lists them; each module's add_parser registers its verb
COMMANDS: tuple[ModuleType, ...] = (
    grade,
    batch,
    image,
    rescore,
    writeup,
    pack,
    gradescope_autograder,
    export_handout,
    kernel_cache,
    leaderboard,
    reference_cache,
    serve,
    tokens,
    submit,
    submissions,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grader", description="Grade Triton kernel submissions against the assignment spec."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None, *, leave: bool = False) -> int:
    """Run one verb; its exit code. With `leave`, a verb that asks to (`leaves_at_once`) ends the
    process when it returns instead of going through Python's finalization."""
    args = build_parser().parse_args(argv)
    bytecode.use_here()  # before a verb imports PyTorch (grader/engine/sandbox/bytecode.py)
    code = _run(args)
    if leave and getattr(args, "leaves_at_once", False):
        _leave(code)
    return code


def _run(args: argparse.Namespace) -> int:
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


def _leave(code: int) -> NoReturn:
    """Exit now, the streams flushed: with PyTorch loaded, Python's finalization takes a second or
    more (tearing down modules), which every grading of a batch or of the service would wait for."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken pipe: nothing more can be said there
    os._exit(code)


def entry() -> int:
    """The `grader` console script."""
    return main(leave=True)


if __name__ == "__main__":
    sys.exit(main(leave=True))
