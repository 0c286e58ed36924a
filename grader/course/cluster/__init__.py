"""Grading a class on more than one machine: `grader batch --backend ray|slurm`.

Each backend hands one `grader grade` per student to an engine the staff already run (Ray for a
set of GPU machines, Slurm through submitit for a university cluster) and gives grader.course.batch a runner
like its local ones, so discovery, resume by content hash, atomic files, error rows and the
gradebook are the local backend's own code. On the node, the grading is the local subprocess or
Docker runner itself (grader.course.cluster.node), rebuilt from a picklable recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console

if TYPE_CHECKING:
    from grader.course.batch.context import Context
    from grader.course.batch.options import BatchOptions

BACKENDS = ("local", "ray", "slurm")


def make_runner(ctx: Context, options: BatchOptions, console: Console) -> tuple[Any, dict[str, Any]]:
    """The runner for options.backend and the gradebook's metadata about it."""
    from grader.course.batch.errors import BatchError

    if options.gpus or (options.jobs or 1) > 1:
        how = "--ray-resources" if options.backend == "ray" else "--slurm-gpus-per-task"
        raise BatchError(
            f"--backend {options.backend} places each grading itself: drop --gpus and --jobs (what one grading "
            f"gets: {how})"
        )
    if options.backend == "ray":
        from grader.course.cluster.ray_backend import make_runner as make_ray

        return make_ray(ctx, options, console)
    from grader.course.cluster.slurm_backend import make_runner as make_slurm

    return make_slurm(ctx, options, console)
