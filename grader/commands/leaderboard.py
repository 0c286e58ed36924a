"""`grader leaderboard`: its command line."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from grader.course.leaderboard.inputs import LeaderboardError
from grader.course.leaderboard.names import SALT_ENV
from grader.course.leaderboard.site import build_site
from grader.course.leaderboard.staff import staff_folder


def cmd_leaderboard(args: argparse.Namespace) -> int:
    console = Console(stderr=True, soft_wrap=True)

    def warn(message: str) -> None:
        console.print(f"[yellow]warning:[/yellow] {escape(message)}")

    out = Path(args.out)
    salt = args.salt if args.salt is not None else os.environ.get(SALT_ENV)
    if salt is None:
        warn(
            f"no --salt and no ${SALT_ENV}: the pseudonyms are keyed by the assignment's name, so anyone with the "
            f"class list can match them to students; set {SALT_ENV} to a private key (the same for every run)"
        )
    try:
        data = build_site(
            [Path(p) for p in args.results],
            out,
            title=args.title,
            names_file=Path(args.names) if args.names else None,
            salt=salt,
            warn=warn,
            staff_out=Path(args.staff_out) if args.staff_out else None,
        )
    except LeaderboardError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    ranked = sum(row["kind"] == "student" for row in data["ranking"])
    staff = Path(args.staff_out) if args.staff_out else staff_folder(out)
    console.print(
        f"wrote {escape(str(out / 'index.html'))} and leaderboard.json: {ranked} ranked, {data['flagged']} "
        f"flagged, {data['not_graded']} without a graded submission"
    )
    console.print(f"wrote the staff page (names and reasons; do not publish) to {escape(str(staff / 'index.html'))}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `grader leaderboard` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "leaderboard",
        help="build a static leaderboard site from result.json files",
        description="Build a static leaderboard (index.html + leaderboard.json) from grader results. "
        "Each student's best graded submission is ranked by total score, then by the geometric-mean speedup "
        "against the staff reference; flagged submissions are listed apart and not ranked.",
    )
    p.add_argument(
        "results", nargs="+", help="batch output folders (searched recursively for result.json) or result.json files"
    )
    p.add_argument("--out", required=True, help="folder for the site (index.html, leaderboard.json)")
    p.add_argument("--title", default=None, help="page title (default: '<assignment> leaderboard')")
    p.add_argument(
        "--names",
        default=None,
        help="display names: CSV 'student,display_name' or a JSON object; others get pseudonyms",
    )
    p.add_argument(
        "--salt",
        default=None,
        help=f"key for the pseudonyms (default: ${SALT_ENV}, else the assignment name); keep it private so that "
        f"aliases cannot be matched to a class roster",
    )
    p.add_argument(
        "--staff-out",
        default=None,
        help="folder for the staff page with names and flag reasons (default: OUT-staff beside the site; never "
        "publish it)",
    )
    p.set_defaults(func=cmd_leaderboard)
    return p
