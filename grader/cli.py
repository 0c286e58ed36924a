"""`grader`: the command line of the grading engine.

Exit codes: 0 whenever a grade was produced (whatever the submission did), 2 when grading itself
could not run (a bad path, a bad spec, no GPU when one was required).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from grader.cli_batch import add_parsers as add_batch_parsers
from grader.cli_results import add_parsers as add_results_parsers
from grader.spec import DEFAULT_SPEC, SpecError, load_assignment

console = Console(stderr=True)


def _secret(args: argparse.Namespace) -> str:
    from grader.orchestrator import DEFAULT_SECRET

    if getattr(args, "secret_file", None):
        return Path(args.secret_file).read_text().strip()
    return args.secret or os.environ.get("GRADER_SECRET") or DEFAULT_SECRET


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml (hidden_cases.toml beside it is merged)")
    p.add_argument("--timeout", type=float, default=None, help="wall-clock limit per problem, seconds (default: the spec's)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="cuda: real kernels; cpu: Triton's interpreter")
    p.add_argument("--secret", default=None, help="secret mixed into input seeds (prefer GRADER_SECRET or --secret-file: argv is visible to other users)")
    p.add_argument("--secret-file", default=None, help="file holding the secret")
    p.add_argument("--problems", default=None, help="comma-separated subset of problems to grade")
    p.add_argument("--worker-user", default="nobody", help="fallback unprivileged user for the worker when no transient per-worker uid can be allocated (grader run as root)")
    p.add_argument("--public-only", action="store_true", help="ignore hidden cases even when their file is present")
    p.add_argument("--no-timing", action="store_true", help="skip performance timing (correctness only) on a GPU")
    p.add_argument("--kernel-cache", default=None, help="where each submission's compiled kernels are kept between gradings (default: $GRADER_KERNEL_CACHE or ~/.cache/triton-kernels-grader/kernels)")
    p.add_argument("--no-kernel-cache", action="store_true", help="compile every kernel afresh, keep nothing")
    p.add_argument(
        "--parallel",
        type=_positive_int,
        default=None,
        help="problems whose correctness cases run at once, each in its own worker (default: all on a GPU, 1 on the CPU); timing is always one at a time",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def _options(args: argparse.Namespace, hide: list[Path]):
    from grader import kernel_cache
    from grader.orchestrator import GradeOptions

    return GradeOptions(
        device=args.device,
        timeout=args.timeout,
        secret=_secret(args),
        worker_user=args.worker_user,
        problems=args.problems.split(",") if args.problems else None,
        hide=hide,
        time_performance=not getattr(args, "no_timing", False),
        parallel=getattr(args, "parallel", None),
        kernel_cache=None if getattr(args, "no_kernel_cache", False) else Path(getattr(args, "kernel_cache", None) or kernel_cache.default_root()),
    )


def _hidden_paths(spec: Path, out: Path) -> list[Path]:
    """What a worker must not see: the reference, the hidden cases, the results, secret files."""
    root = spec.resolve().parent.parent
    paths = [root / "reference", spec.resolve().with_name("hidden_cases.toml"), out.resolve()]
    extra = os.environ.get("GRADER_HIDE")
    if extra:
        paths += [Path(p) for p in extra.split(os.pathsep) if p]
    return paths


def cmd_grade(args: argparse.Namespace) -> int:
    from grader.orchestrator import grade
    from grader.report import write_result
    from grader.summary import print_result

    submission = Path(args.path)
    if not submission.is_dir():
        console.print(f"[red]error:[/red] {escape(str(submission))} is not a folder (expected a submission folder with gelu.py, softmax.py, ...)")
        return 2
    assignment = load_assignment(args.spec, hidden=False if args.public_only else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    options = _options(args, _hidden_paths(args.spec, out) + ([Path(args.secret_file)] if args.secret_file else []))
    with console.status(f"grading {submission}") as status:
        options.progress = lambda text: status.update(f"grading {submission}: {text}")
        result = grade(assignment, submission, options)
    write_result(result, out)
    print_result(result, Console())
    console.print(f"wrote {out / 'result.json'}, {out / 'report.html'}, {out / 'gradescope' / 'results.json'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grader", description="Grade Triton kernel submissions against the assignment spec.")
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade one submission folder")
    g.add_argument("path", help="submission folder (gelu.py, softmax.py, matmul.py, flash_attention.py)")
    g.add_argument("--out", default="grades/single", help="folder for result.json, report.html, gradescope/")
    _common(g)
    g.set_defaults(func=cmd_grade)

    add_batch_parsers(sub, _common, _options, _hidden_paths)
    add_results_parsers(sub)

    from grader import export, kernel_cache, leaderboard, reference_cache

    export.add_parser(sub)
    kernel_cache.add_parser(sub)
    leaderboard.add_parser(sub)
    reference_cache.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")  # locations such as problems[gelu] are not markup
        return 2
    except (RuntimeError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
