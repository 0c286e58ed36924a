"""`grader submissions --server URL --token TOKEN`: a student's past submissions, results and quota."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.commands.submit import add_server_arguments, client_from


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("submissions", help="list your submissions to the grading service, their results and quota")
    add_server_arguments(p)
    p.add_argument("--id", type=int, default=None, help="show this submission's result in full")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from grader.commands.submit import show
    from grader.course.service.client import ServerError

    console = Console(stderr=True, soft_wrap=True)
    client = client_from(args, console)
    if client is None:
        return 2
    try:
        if args.id is not None:
            return show(client.submission(args.id), client.server, console)
        listing = client.submissions()
    except ServerError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    table = Table(title=f"submissions of {escape(listing['student'])}")
    for col in ("id", "mode", "submitted", "state", "score", "speedup", "note"):
        table.add_column(col)
    for row in listing["submissions"]:
        score = "" if row["score"] is None else f"{row['score']:g} / {row['max_score']:g}"
        speedup = "" if row["speedup"] is None else f"{row['speedup']:.3f}x"
        note = row["withheld"] or "; ".join(row["flags"]) or ("late" if row["late"] else "")
        table.add_row(str(row["id"]), row["mode"], row["created_at"], row["state"], score, speedup, escape(note))
    Console().print(table)
    left = ", ".join(
        f"{mode} {_left(q['per_hour'])}/hour {_left(q['per_day'])}/day" for mode, q in listing["quota"].items()
    )
    console.print(f"remaining: {left}")
    return 0


def _left(n: int | None) -> str:
    return "∞" if n is None else str(n)
