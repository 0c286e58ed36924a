"""`grader kernel-cache list|prune`: the kept compiled kernels of graded submissions."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path

from grader.engine.kernel_cache import ENV, TOTAL_ENV, default_root, evict, max_total_bytes, parse_size, slots


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`grader kernel-cache list|prune`."""
    parser = sub.add_parser("kernel-cache", help="list or prune the kept compiled kernels of graded submissions")
    actions = parser.add_subparsers(dest="action", required=True)
    for name, text in (
        ("list", "every kept slot, least recently used first, with its size"),
        ("prune", "remove slots, least recently used first"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument(
            "--kernel-cache",
            type=Path,
            default=None,
            help=f"the cache folder (default: ${ENV} or ~/.cache/triton-kernels-grader/kernels)",
        )
        action.set_defaults(func=_cmd_kernel_cache)
    prune = actions.choices["prune"]
    prune.add_argument(
        "--max-bytes",
        type=parse_size,
        default=None,
        help=f"keep at most this much in all, e.g. 4G (default: ${TOTAL_ENV} or 8G)",
    )
    prune.add_argument(
        "--older-than", type=float, default=None, metavar="DAYS", help="also remove slots unused for this many days"
    )
    prune.add_argument("--all", action="store_true", help="remove every slot")


def _cmd_kernel_cache(args: argparse.Namespace) -> int:
    root = args.kernel_cache or default_root()
    if args.action == "list":
        kept = slots(root)
        for slot_ in kept:
            when = datetime.fromtimestamp(slot_.used).isoformat(sep=" ", timespec="seconds")
            print(f"{slot_.name}  {slot_.files:6d} files  {slot_.bytes / 2**20:9.1f} MiB  last used {when}")
        total = sum(k.bytes for k in kept)
        print(f"{len(kept)} slot(s), {total / 2**20:.1f} MiB of at most {max_total_bytes() / 2**20:.0f} MiB, in {root}")
        return 0
    removed = evict(
        root, 0 if args.all else args.max_bytes, None if args.older_than is None else args.older_than * 86400
    )
    freed = sum(k.bytes for k in removed)
    print(f"removed {len(removed)} slot(s), {freed / 2**20:.1f} MiB, from {root}")
    return 0
