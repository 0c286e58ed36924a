"""`grader batch`: its command line, turned once into BatchOptions for grader.course.batch.run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from grader.commands import cluster_options
from grader.course.batch.concurrency import parse_jobs
from grader.course.batch.options import BatchOptions, ContainerOptions
from grader.course.containers.docker import DEFAULT_MEMORY, DEFAULT_PIDS
from grader.engine.orchestrator import launch


def add_parser(sub: Any) -> None:
    b = sub.add_parser(
        "batch",
        help="grade every submission in a folder (in containers with --docker)",
        description=(
            "Grade every entry of SUBMISSIONS (a folder, .zip or .tar.gz per student, or a Gradescope export) "
            "into OUT: "
            "OUT/<student>/{result.json,report.html,gradescope/results.json}, OUT/gradebook.csv, OUT/summary.json. "
            "Resumable: run it again after an interruption and only what is missing is graded."
        ),
    )
    b.add_argument(
        "submissions",
        help="folder with one entry per student: a folder, a .zip or a .tar.gz (ids from the names, or "
        "manifest.csv / manifest.json)",
    )
    b.add_argument("--out", required=True, help="results folder")
    b.add_argument("--regrade", action="store_true", help="grade again even when a result for the same content exists")
    b.add_argument(
        "--nested-exports",
        action="store_true",
        help="folders of SUBMISSIONS that hold a submission_metadata.yml are Gradescope exports (several "
        "sections); without it only SUBMISSIONS itself is read as an export",
    )
    b.add_argument(
        "--retry-errors",
        action="store_true",
        help="grade again the students whose last result is an error (a hang, a crash, a bad archive)",
    )
    b.add_argument(
        "--jobs",
        type=_jobs,
        default="auto",
        help="submissions graded at once: on a GPU their correctness runs together and their timing one "
        "at a time (per GPU with --gpus); auto (the default): from cores and GPU memory on a GPU, 1 on a CPU",
    )
    b.add_argument(
        "--docker",
        action="store_true",
        help="grade each submission in its own container (no network, limits, read-only submission)",
    )
    b.add_argument(
        "--gpus",
        default=None,
        help="'all' or GPU indices such as 0,1: one GPU per container, as many containers at once as GPUs",
    )
    b.add_argument(
        "--image",
        default=None,
        help="grading image (default: triton-kernels-grader:<version>, or :<version>-cpu without --gpus)",
    )
    b.add_argument("--memory", default=DEFAULT_MEMORY, help=f"memory limit per container (default {DEFAULT_MEMORY})")
    b.add_argument(
        "--cpus", type=float, default=None, help="CPUs per container (default: this machine's cores shared out)"
    )
    b.add_argument(
        "--pids", type=int, default=DEFAULT_PIDS, help=f"process/thread limit per container (default {DEFAULT_PIDS})"
    )
    b.add_argument(
        "--container-timeout",
        type=float,
        default=None,
        help="wall-clock limit per student in seconds; past it the container is killed (default: the problems' "
        "limits plus start-up)",
    )
    cluster_options.add_backend_arguments(b)  # --backend ray|slurm and their options
    launch.add_arguments(b)
    b.set_defaults(func=run)


def _jobs(text: str) -> int | None:
    try:
        return parse_jobs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def options_from_args(args: argparse.Namespace) -> BatchOptions:
    """The typed options of one `grader batch` command line."""
    out, root = Path(args.out), Path(args.submissions)
    hide = launch.hidden_paths(args.spec, out) + [root.resolve()]
    if args.secret_file:
        hide.append(Path(args.secret_file).resolve())  # as `grader grade` does: workers never see it
    docker = (
        ContainerOptions(image=args.image, memory=args.memory, pids=args.pids, cpus=args.cpus) if args.docker else None
    )
    return BatchOptions(
        submissions=root,
        out=out,
        grading=launch.GradeCommand.from_args(args, hide),
        regrade=args.regrade,
        retry_errors=args.retry_errors,
        nested_exports=args.nested_exports,
        jobs=args.jobs,
        gpus=args.gpus,
        docker=docker,
        container_timeout=args.container_timeout,
        backend=args.backend,
        ray=cluster_options.ray_options(args),
        slurm=cluster_options.slurm_options(args),
    )


def run(args: argparse.Namespace) -> int:
    from grader.course.batch.run import run_batch

    options = options_from_args(args)
    if options.backend == "local":
        return run_batch(options)
    from grader.course.cluster import make_runner  # Ray or Slurm: the cluster builds on grader.course.batch

    return run_batch(options, make_runner)
