"""The --backend options of `grader batch`: Ray's and Slurm's, parsed into what BatchOptions holds."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from grader.course.cluster import BACKENDS

if TYPE_CHECKING:
    from grader.course.batch.options import RayOptions, SlurmOptions


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """The --backend options of `grader batch` (the engines' own ones live in their modules)."""
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: this machine (default); ray: a Ray cluster (--ray-address); slurm: a Slurm job array "
        "through submitit",
    )
    add_ray_arguments(parser)
    add_slurm_arguments(parser)


def ray_options(args: argparse.Namespace) -> RayOptions:
    """What the --ray-* arguments ask for (`grader batch` and `grader serve` alike)."""
    from grader.course.batch.options import RayOptions

    return RayOptions(address=args.ray_address, resources=args.ray_resources)


def slurm_options(args: argparse.Namespace) -> SlurmOptions:
    """What the --slurm-* arguments ask for (`grader batch` and `grader serve` alike)."""
    from grader.course.batch.options import SlurmOptions

    return SlurmOptions(
        partition=args.slurm_partition,
        gpus_per_task=args.slurm_gpus_per_task,
        cpus_per_task=args.slurm_cpus_per_task,
        time_min=args.slurm_time,
        sbatch=list(args.slurm_option),
        setup=list(args.slurm_setup),
    )


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("ray backend (--backend ray)")
    group.add_argument(
        "--ray-address",
        default=None,
        help="the cluster's head, e.g. 10.0.0.1:6379 (default: start a Ray instance on this machine for the batch)",
    )
    group.add_argument(
        "--ray-resources",
        type=ray_resources,
        default=None,
        help='what one grading asks Ray for, as JSON: default {"CPU": 2, "GPU": 0.25} with --device cuda (four '
        'per GPU, timed one at a time), {"CPU": 1} otherwise; custom resources too, e.g. {"CPU": 1, "grader_slot": 1}',
    )


def ray_resources(text: str) -> dict[str, float]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(
            f'--ray-resources: not JSON ({exc}); expected e.g. \'{{"CPU": 1, "GPU": 1}}\''
        ) from None
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and v >= 0 for k, v in value.items()
    ):
        raise argparse.ArgumentTypeError(
            '--ray-resources: expected an object of resource names to amounts >= 0, e.g. \'{"CPU": 1, "GPU": 1}\''
        )
    return {k: float(v) for k, v in value.items()}


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("slurm backend (--backend slurm)")
    group.add_argument(
        "--slurm-partition", default=None, help="partition for the job array (default: the cluster's default)"
    )
    group.add_argument(
        "--slurm-gpus-per-task",
        type=int,
        default=None,
        help="GPUs per array element (default: 1 with --device cuda, none otherwise)",
    )
    group.add_argument(
        "--slurm-cpus-per-task", type=int, default=None, help="CPUs per array element (default: Slurm's)"
    )
    group.add_argument(
        "--slurm-time",
        type=int,
        default=None,
        help="time limit per element in minutes (default: the problems' limits plus start-up)",
    )
    group.add_argument(
        "--slurm-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other sbatch option, repeatable: --slurm-option account=cs336 --slurm-option qos=normal",
    )
    group.add_argument(
        "--slurm-setup",
        action="append",
        default=[],
        metavar="COMMAND",
        help="a shell line run before each element, repeatable (e.g. 'module load cuda')",
    )
