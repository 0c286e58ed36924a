"""`grader tokens --db DB --roster ROSTER.csv --out TOKENS.csv`: one secret token per student.

Also `--staff NAME` (a staff token), `--revoke ID` (that token stops working at once) and
`--list`. Tokens are stored hashed: the CSV written here is the only place they are in clear.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("tokens", help="issue (or revoke) the service's tokens: one per student, one per staff")
    p.add_argument("--db", required=True, help="the service's database (`grader serve --db`)")
    p.add_argument("--roster", type=Path, default=None, help="CSV with a header: student_id (or id), name, email")
    p.add_argument("--staff", action="append", default=[], metavar="NAME", help="issue a staff token (repeatable)")
    p.add_argument("--out", type=Path, default=None, help="the CSV of new tokens to hand out (mode 0600)")
    p.add_argument("--only-new", action="store_true", help="skip roster students who already have a token")
    p.add_argument("--revoke", action="append", default=[], metavar="ID", help="revoke this person's token")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from grader.course.batch.discovery import student_id
    from grader.course.service import db
    from grader.course.service.tokens import (
        Person,
        RosterError,
        has_token,
        issue,
        read_roster,
        revoke,
        write_tokens,
    )

    console = Console(stderr=True, soft_wrap=True)
    engine = db.open_db(args.db)
    for person_id in args.revoke:
        done = revoke(engine, person_id)
        console.print(f"{'revoked' if done else '[yellow]no such person:[/yellow]'} {escape(person_id)}")
    wanted: list[Person] = []
    if args.roster:
        try:
            wanted += read_roster(args.roster)
        except RosterError as exc:
            console.print(f"[red]error:[/red] {escape(str(exc))}")
            return 2
    wanted += [Person(student_id(name), name, "", "staff") for name in args.staff]
    if args.only_new:
        wanted = [p for p in wanted if not has_token(engine, p.id)]
    if not wanted:
        return 0 if args.revoke else _nothing(console)
    if args.out is None:
        console.print("[red]error:[/red] --out TOKENS.csv is needed: new tokens are shown only once")
        return 2
    issued = [(person, issue(engine, person)) for person in wanted]
    write_tokens(args.out, issued)
    console.print(
        f"wrote {len(issued)} token(s) to {escape(str(args.out))} (readable by you only); any earlier token of "
        f"these people no longer works"
    )
    return 0


def _nothing(console: Console) -> int:
    console.print("[red]error:[/red] nothing to do: give --roster, --staff or --revoke")
    return 2
