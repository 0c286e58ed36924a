"""The `grader batch` and `grader image build` command lines (wired into grader/cli.py).

Kept apart from cli.py so the batch and container options live next to the code that reads them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from grader import cluster
from grader.spec import DEFAULT_SPEC, load_assignment

console = Console(stderr=True)


def add_parsers(
    sub: Any,
    common: Callable[[argparse.ArgumentParser], None],
    make_options: Callable[..., Any],
    hidden_paths: Callable[..., list[Path]],
) -> None:
    """Add `batch` and `image` to the `grader` subparsers. `common` adds the options that
    `grader grade` has too; `make_options` and `hidden_paths` are cli.py's helpers."""

    def cmd_batch(args: argparse.Namespace) -> int:
        from grader.batch import run_batch

        return run_batch(args, make_options, hidden_paths)

    b = sub.add_parser(
        "batch",
        help="grade every submission in a folder (in containers with --docker)",
        description=(
            "Grade every entry of SUBMISSIONS (a folder, .zip or .tar.gz per student, or a Gradescope export) into OUT: "
            "OUT/<student>/{result.json,report.html,gradescope/results.json}, OUT/gradebook.csv, OUT/summary.json. "
            "Resumable: run it again after an interruption and only what is missing is graded."
        ),
    )
    b.add_argument("submissions", help="folder with one entry per student: a folder, a .zip or a .tar.gz (ids from the names, or manifest.csv / manifest.json)")
    b.add_argument("--out", required=True, help="results folder")
    b.add_argument("--regrade", action="store_true", help="grade again even when a result for the same content exists")
    b.add_argument("--retry-errors", action="store_true", help="grade again the students whose last result is an error (a hang, a crash, a bad archive)")
    b.add_argument("--jobs", type=int, default=1, help="submissions graded at once on the CPU (with --gpus: one per GPU)")
    b.add_argument("--docker", action="store_true", help="grade each submission in its own container (no network, limits, read-only submission)")
    b.add_argument("--gpus", default=None, help="'all' or GPU indices such as 0,1: one GPU per container, as many containers at once as GPUs")
    b.add_argument("--image", default=None, help="grading image (default: triton-kernels-grader:<version>, or :<version>-cpu without --gpus)")
    b.add_argument("--memory", default="16g", help="memory limit per container (default 16g)")
    b.add_argument("--cpus", type=float, default=None, help="CPUs per container (default: this machine's cores shared out)")
    b.add_argument("--pids", type=int, default=4096, help="process/thread limit per container (default 4096)")
    b.add_argument(
        "--container-timeout",
        type=float,
        default=None,
        help="wall-clock limit per student in seconds; past it the container is killed (default: the problems' limits plus start-up)",
    )
    cluster.add_arguments(b)  # --backend ray|slurm and their options (grader/cluster/)
    common(b)
    b.set_defaults(func=cmd_batch)

    image = sub.add_parser("image", help="the grading image (docker)")
    image_sub = image.add_subparsers(dest="image_command", required=True)
    build = image_sub.add_parser("build", help="build docker/Dockerfile, tagged with the assignment version")
    build.add_argument("--cpu", action="store_true", help="the CPU variant: local base image and wheels from docker/wheels/ (see scripts/setup-docker.sh)")
    build.add_argument("--base", default=None, help="base image (default: the Dockerfile's CUDA PyTorch image, or the local CPU base with --cpu)")
    build.add_argument("--tag", default=None, help="image tag (default: triton-kernels-grader:<version>[-cpu])")
    build.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    build.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml whose version tags the image")
    build.set_defaults(func=cmd_image_build)


def cmd_image_build(args: argparse.Namespace) -> int:
    from grader.containers import build_image

    assignment = load_assignment(args.spec, hidden=False)
    version = assignment.assignment.version
    with console.status(f"building the grading image for {assignment.assignment.name} {version}") as status:

        def log(line: str) -> None:
            if line.startswith("Step "):
                status.update(f"building: {line[:100]}")

        tag = build_image(version, cpu=args.cpu, base=args.base, tag=args.tag, no_cache=args.no_cache, log=log)
    console.print(f"built {tag}")
    return 0
