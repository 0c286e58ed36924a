"""`grader reference-cache build|path`: the staff reference compiled and autotuned once per machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.engine.judge.reference_build import build
from grader.engine.judge.reference_cache import ENV, location, size
from grader.engine.spec.model import DEFAULT_SPEC


def add_parser(sub: Any) -> None:
    """`grader reference-cache build|path` on the CLI's subparsers."""
    p = sub.add_parser("reference-cache", help="the staff reference's compiled kernels, kept once per machine")
    p.add_argument(
        "action",
        choices=["build", "path"],
        help="build: compile and tune the reference now (GPU); path: where it is kept here",
    )
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml whose version names the cache")
    p.add_argument("--problems", default=None, help="comma-separated subset of problems (build)")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="build: also pack the cache into FILE (a .tar.gz) for `grade`/`batch --reference-cache FILE` elsewhere",
    )
    p.set_defaults(func=_cmd)


def _cmd(args: Any) -> int:
    from grader.engine.assignment.load import load_assignment

    if args.action == "path":
        folder = location(load_assignment(args.spec, hidden=False).assignment.version)
        print(folder if folder is not None else f"switched off (${ENV}=off)")
        return 0
    folder = build(args.spec, args.problems.split(",") if args.problems else None)
    files, nbytes = size(folder)
    print(f"{folder}: {files} files, {nbytes / 2**20:.1f} MiB")
    if args.out is not None:
        from grader.engine.judge.reference_archive import pack

        packed, _ = pack(load_assignment(args.spec, hidden=False).assignment.version, args.out)
        print(f"{args.out}: {packed} files, {args.out.stat().st_size / 2**20:.1f} MiB compressed")
    return 0
