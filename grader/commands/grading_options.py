"""The options `grader grade` and `grader batch` share, and the GradeOptions built from them."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from grader import kernel_cache
from grader.judge.reference_archive import ENV as ARCHIVE_ENV
from grader.orchestrator.options import DEFAULT_SECRET, GradeOptions
from grader.spec.model import DEFAULT_SPEC


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (hidden_cases.toml beside it is merged)"
    )
    p.add_argument(
        "--timeout", type=float, default=None, help="wall-clock limit per problem, seconds (default: the spec's)"
    )
    p.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="cuda: real kernels; cpu: Triton's interpreter",
    )
    p.add_argument(
        "--secret",
        default=None,
        help="secret mixed into input seeds (prefer GRADER_SECRET or --secret-file: argv is visible to other users)",
    )
    p.add_argument("--secret-file", default=None, help="file holding the secret")
    p.add_argument("--problems", default=None, help="comma-separated subset of problems to grade")
    p.add_argument(
        "--worker-user",
        default="nobody",
        help="fallback unprivileged user for the worker when no transient per-worker uid can be allocated "
        "(grader run as root)",
    )
    p.add_argument("--public-only", action="store_true", help="ignore hidden cases even when their file is present")
    p.add_argument("--no-timing", action="store_true", help="skip performance timing (correctness only) on a GPU")
    p.add_argument(
        "--profile",
        action="store_true",
        help="on a GPU, also profile one warm call of each benchmark shape: where its GPU time goes, kernel by kernel",
    )
    p.add_argument(
        "--kernel-cache",
        default=None,
        help="where each submission's compiled kernels are kept between gradings (default: $GRADER_KERNEL_CACHE "
        "or ~/.cache/triton-kernels-grader/kernels)",
    )
    p.add_argument("--no-kernel-cache", action="store_true", help="compile every kernel afresh, keep nothing")
    p.add_argument(
        "--reference-cache",
        default=None,
        metavar="FILE",
        help="the staff reference's compiled kernels, from `grader reference-cache build --out FILE`: a fresh "
        "machine skips the reference's autotuning (default: $GRADER_REFERENCE_ARCHIVE)",
    )
    p.add_argument(
        "--parallel",
        type=positive_int,
        default=None,
        help="problems whose correctness cases run at once, each in its own worker (default: all on a GPU, 1 on "
        "the CPU); timing is always one at a time",
    )


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def secret(args: argparse.Namespace) -> str:
    if args.secret_file:
        return Path(args.secret_file).read_text().strip()
    return args.secret or os.environ.get("GRADER_SECRET") or DEFAULT_SECRET


def grade_options(args: argparse.Namespace, hide: list[Path]) -> GradeOptions:
    """The grading options these arguments ask for; `hide`: what the worker must not see."""
    if args.reference_cache:
        # through the environment: `grader batch`'s children and `grader grade` read it alike
        os.environ[ARCHIVE_ENV] = str(Path(args.reference_cache).resolve())
    if os.environ.get(ARCHIVE_ENV):
        hide.append(Path(os.environ[ARCHIVE_ENV]))  # the reference's compiled code: never the worker's to read
    return GradeOptions(
        device=args.device,
        timeout=args.timeout,
        secret=secret(args),
        worker_user=args.worker_user,
        problems=args.problems.split(",") if args.problems else None,
        hide=hide,
        time_performance=not args.no_timing,
        profile=args.profile,
        parallel=args.parallel,
        kernel_cache=None if args.no_kernel_cache else Path(args.kernel_cache or kernel_cache.default_root()),
    )


def hidden_paths(spec: Path, out: Path) -> list[Path]:
    """What a worker must not see: the reference, the hidden cases, the results, secret files."""
    root = spec.resolve().parent.parent
    paths = [root / "reference", spec.resolve().with_name("hidden_cases.toml"), out.resolve()]
    extra = os.environ.get("GRADER_HIDE")
    if extra:
        paths += [Path(p) for p in extra.split(os.pathsep) if p]
    return paths
