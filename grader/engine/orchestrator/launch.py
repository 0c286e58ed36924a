"""The one contract between a class and the engine: `grader grade`'s command line, both ways.

The course layer (batch, the cluster backends, containers, the service, Gradescope's run) never
calls the engine: it builds a `GradeCommand`, runs the command line it turns into somewhere (a
child process here, a container, a Ray task, a Slurm element), and reads the result.json that
command writes. `grader grade` parses the same options back with `add_arguments` and
`GradeCommand.from_args`. Keeping both directions in this module is what stops them drifting:
a new option is added here once, and the round trip is tested (tests/grader/engine/orchestrator/test_launch.py).

The secret and the paths a worker must not see travel in the environment (`env`), never in
argv, which other users of the machine can read. No torch at import: the course layer is light.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from grader import ROOT
from grader.engine import kernel_cache
from grader.engine.sandbox import scope
from grader.engine.spec.model import DEFAULT_SPEC

DEFAULT_SECRET = "local-default-secret"
#: the reference's compiled kernels (`grader reference-cache build`): read by every `grader grade`
ARCHIVE_ENV = "GRADER_REFERENCE_ARCHIVE"
#: more paths a worker must not see, os.pathsep-separated (a batch's class folder, a secret file)
HIDE_ENV = "GRADER_HIDE"
SECRET_ENV = "GRADER_SECRET"
#: where a launched grading records the processes it starts: `sweep` ends any it left behind
SCOPE_ENV = scope.ENV
Device = Literal["auto", "cpu", "cuda"]


class GradeCommand(BaseModel):
    """How one submission is graded: everything `grader grade` is told, as typed fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec: Path | None = None  # None: the checkout's (or the image's) assignment/assignment.toml
    device: Device = "auto"
    timeout: float | None = None  # per problem; None: the spec's
    problems: tuple[str, ...] | None = None
    public_only: bool = False
    timing: bool = True
    profile: bool = False
    parallel: int | None = None
    keep_kernels: bool = True
    kernel_cache: Path | None = None  # None: `grader grade`'s default (kernel_cache.default_root)
    worker_user: str = "nobody"
    #: in the environment only (`env`): never in argv
    secret: str = Field(default=DEFAULT_SECRET, repr=False)
    hide: tuple[Path, ...] = ()

    def args(self, submission: str | Path, out: str | Path) -> list[str]:
        """The `grade` verb and its arguments (what follows `grader`)."""
        argv = ["grade", str(submission), "--out", str(out), "--device", self.device]
        if self.spec is not None:
            argv += ["--spec", str(self.spec)]
        if self.timeout:
            argv += ["--timeout", f"{self.timeout:g}"]
        if self.problems:
            argv += ["--problems", ",".join(self.problems)]
        if self.public_only:
            argv.append("--public-only")
        if not self.timing:
            argv.append("--no-timing")
        if self.profile:
            argv.append("--profile")
        if self.parallel:
            argv += ["--parallel", str(self.parallel)]
        if not self.keep_kernels:
            argv.append("--no-kernel-cache")
        elif self.kernel_cache is not None:
            argv += ["--kernel-cache", str(self.kernel_cache)]
        return [*argv, "--worker-user", self.worker_user]

    def argv(self, submission: str | Path, out: str | Path) -> list[str]:
        """The whole command line for a child process on this machine."""
        return [sys.executable, "-m", "grader.cli", *self.args(submission, out)]

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (this process's environment) with the secret and the hidden paths this command carries."""
        env = {k: v for k, v in (os.environ if base is None else base).items() if k not in (SECRET_ENV, HIDE_ENV)}
        env[SECRET_ENV] = self.secret
        if self.hide:
            env[HIDE_ENV] = os.pathsep.join(str(p) for p in self.hide)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        return env

    @classmethod
    def from_args(cls, args: argparse.Namespace, hide: list[Path]) -> GradeCommand:
        """The command these parsed arguments (`add_arguments`) ask for; `hide`: what workers must not see."""
        if args.reference_cache:
            # through the environment: `grader batch`'s children and `grader grade` read it alike
            os.environ[ARCHIVE_ENV] = str(Path(args.reference_cache).resolve())
        if os.environ.get(ARCHIVE_ENV):
            hide = [*hide, Path(os.environ[ARCHIVE_ENV])]  # the reference's compiled code: never the worker's
        return cls(
            spec=args.spec,
            device=args.device,
            timeout=args.timeout,
            problems=tuple(args.problems.split(",")) if args.problems else None,
            public_only=args.public_only,
            timing=not args.no_timing,
            profile=args.profile,
            parallel=args.parallel,
            keep_kernels=not args.no_kernel_cache,
            kernel_cache=Path(args.kernel_cache) if args.kernel_cache else None,
            worker_user=args.worker_user,
            secret=read_secret(args),
            hide=tuple(hide),
        )

    def kernel_root(self) -> Path | None:
        """Where this grading keeps compiled kernels (None: nowhere)."""
        if not self.keep_kernels:
            return None
        return self.kernel_cache or kernel_cache.default_root()


def read_secret(args: argparse.Namespace) -> str:
    if args.secret_file:
        return Path(args.secret_file).read_text().strip()
    return args.secret or os.environ.get(SECRET_ENV) or DEFAULT_SECRET


def hidden_paths(spec: Path, out: Path) -> list[Path]:
    """What a worker must not see: the reference, the hidden cases, the results, and $GRADER_HIDE."""
    root = spec.resolve().parent.parent
    paths = [root / "reference", spec.resolve().with_name("hidden_cases.toml"), out.resolve()]
    extra = os.environ.get(HIDE_ENV)
    if extra:
        paths += [Path(p) for p in extra.split(os.pathsep) if p]
    return paths


def resolve_device(requested: str) -> str:
    """ "auto" made concrete on this machine; "cuda" where PyTorch sees no GPU is an error."""
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but PyTorch sees no CUDA GPU on this machine")
    return requested


def sweep(scope_file: Path) -> list[int]:
    """End what a launched grading (run with SCOPE_ENV=scope_file) left running; the pids it ended."""
    return scope.sweep_file(scope_file)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The grading options of `grader grade` (and `grader batch`, which passes them on)."""
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
