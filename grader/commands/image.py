"""`grader image build`: the grading image of `grader batch --docker`, tagged with the assignment version."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from grader.engine.spec.model import DEFAULT_SPEC

console = Console(stderr=True)


def add_parser(sub: Any) -> None:
    image = sub.add_parser("image", help="the grading image (docker)")
    image_sub = image.add_subparsers(dest="image_command", required=True)
    build = image_sub.add_parser("build", help="build docker/Dockerfile, tagged with the assignment version")
    build.add_argument(
        "--cpu",
        action="store_true",
        help="the CPU variant: local base image and wheels from docker/wheels/ (see scripts/setup-docker.sh)",
    )
    build.add_argument(
        "--base",
        default=None,
        help="base image (default: the Dockerfile's CUDA PyTorch image, or the local CPU base with --cpu)",
    )
    build.add_argument("--tag", default=None, help="image tag (default: triton-kernels-grader:<version>[-cpu])")
    build.add_argument("--no-cache", action="store_true", help="rebuild every layer")
    build.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml whose version tags the image")
    build.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    from grader.course.containers.image import build_image
    from grader.engine.assignment.load import load_assignment

    assignment = load_assignment(args.spec, hidden=False)
    version = assignment.assignment.version
    with console.status(f"building the grading image for {assignment.assignment.name} {version}") as status:

        def log(line: str) -> None:
            if line.startswith("Step "):  # Docker's "Step 3/14 : RUN ...": where the build is
                if console.is_terminal:
                    status.update(f"building: {line[:100]}")
                else:  # a log (CI, a pipe): the spinner shows nothing there, a line per step does
                    console.print(f"building: {line[:160]}", highlight=False, markup=False)

        tag = build_image(version, cpu=args.cpu, base=args.base, tag=args.tag, no_cache=args.no_cache, log=log)
    console.print(f"built {tag}")
    return 0
