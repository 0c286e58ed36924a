"""`grader writeup [--check]`: the write-up's tables rewritten from assignment.toml."""

from __future__ import annotations

import argparse
from pathlib import Path

from grader.engine.spec.model import DEFAULT_SPEC


def cmd_writeup(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from grader.course.writeup import WriteupError, blocks, regenerate
    from grader.engine.assignment.load import load_assignment
    from grader.engine.records.files import write_atomic

    console = Console(stderr=True)
    spec = load_assignment(args.spec, hidden=False)
    path = Path(args.writeup) if args.writeup else Path(args.spec).resolve().parent.parent / spec.assignment.writeup
    try:
        text = path.read_text(encoding="utf-8")
        new, changed = regenerate(text, spec)
    except (OSError, WriteupError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    if args.check:
        if changed:
            console.print(
                f"[red]{escape(str(path))} disagrees with {escape(str(args.spec))}[/red] in: "
                f"{escape(', '.join(changed))} (run `grader writeup` to rewrite them)"
            )
            return 1
        console.print(f"{escape(str(path))}: {len(blocks(text))} generated block(s) agree with the spec")
        return 0
    if changed:
        write_atomic(path, new)
    console.print(
        f"{escape(str(path))}: rewrote {len(changed)} of {len(blocks(text))} generated "
        f"block(s){': ' + escape(', '.join(changed)) if changed else ''}"
    )
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("writeup", help="rewrite the write-up's generated tables from the spec (--check: only compare)")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (its public cases only)")
    p.add_argument("--writeup", default=None, help="the write-up (default: the spec's assignment.writeup)")
    p.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a generated block disagrees with the spec"
    )
    p.set_defaults(func=cmd_writeup)
