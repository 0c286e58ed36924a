"""`grader export-handout --out DIR`: the students' repository, with no reference and no hidden cases."""

from __future__ import annotations

import argparse
from pathlib import Path


def cmd_export(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from grader.course.export_handout import LeakError, export_handout

    console = Console(stderr=True)
    try:
        out = export_handout(Path(args.out))
    except (FileExistsError, LeakError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    files = sum(1 for p in out.rglob("*") if p.is_file())
    console.print(f"wrote the student handout to {out} ({files} files); no reference, no hidden cases")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("export-handout", help="write the students' repository (no reference, no hidden cases)")
    p.add_argument("--out", required=True, help="an empty or new folder")
    p.set_defaults(func=cmd_export)
