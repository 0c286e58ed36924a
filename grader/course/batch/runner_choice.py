"""Which runner grades this batch: the cluster backend, containers, or `grader grade` children here."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from typing import Any

from rich.console import Console

from grader.course.batch.concurrency import jobs_at_once
from grader.course.batch.context import Context
from grader.course.batch.errors import BatchError
from grader.course.batch.options import BatchOptions
from grader.course.batch.runners import DockerRunner, Runner, SubprocessRunner

#: a cluster backend's runner maker (grader.course.cluster.make_runner), handed in by whoever starts the
#: batch: the cluster builds on this package, never the other way round
ClusterRunners = Callable[[Context, BatchOptions, Console], tuple[Runner, dict[str, Any]]]


def make_runner(
    ctx: Context, options: BatchOptions, console: Console, cluster: ClusterRunners | None = None
) -> tuple[Runner, dict[str, Any]]:
    """The runner and the gradebook's metadata about it."""
    from grader.course.containers.gpus import parse_gpus

    out = options.out
    if options.backend != "local":
        if cluster is None:
            raise BatchError(f"--backend {options.backend}: no cluster backend was handed to this batch")
        return cluster(ctx, options, console)
    gpus = parse_gpus(options.gpus)
    jobs = options.jobs or 1
    if options.docker is not None:
        from grader.course.containers.docker import docker_client
        from grader.course.containers.image import content_hash, image_tag, inspect_image, remove_stale
        from grader.course.containers.runner import ContainerLimits

        client = docker_client()
        tag = options.docker.image or image_tag(ctx.assignment.assignment.version, cpu=not gpus)
        info = inspect_image(client, tag)
        if info.version and info.version != ctx.assignment.assignment.version:
            raise BatchError(
                f"the image {tag} grades assignment version {info.version}, but the spec is version "
                f"{ctx.assignment.assignment.version}: rebuild it with `grader image build`"
            )
        meta: dict[str, Any] = {"mode": "docker", "image": tag, "gpus": gpus}
        if info.content and info.content != content_hash():
            note = (
                f"the image {tag} was built from other grader/assignment/reference files than this checkout: "
                f"rebuild it with `grader image build` if that is not intended"
            )
            console.print(f"[yellow]warning:[/yellow] {note}")
            meta["image_warning"] = note
        slots: list[str | None] = list(gpus) if gpus else [None] * jobs
        cpus = options.docker.cpus or max(1.0, (os.cpu_count() or 2) / len(slots))
        limits = ContainerLimits(
            memory=options.docker.memory, pids=options.docker.pids, cpus=float(cpus), wall_s=ctx.wall_s
        )
        label = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]
        stale = remove_stale(client, label)
        if stale:
            console.print(f"removed {stale} container(s) left by an earlier, killed run of this batch")
        meta["limits"] = dataclasses.asdict(limits)
        return DockerRunner(ctx, slots, client, tag, limits, label), meta
    if ctx.device == "cuda":
        return _gpu_runner(ctx, options, gpus, console)
    slots = list(gpus) if gpus else [None] * jobs
    return SubprocessRunner(ctx, slots), {"mode": "subprocess", "gpus": gpus, "jobs": len(slots)}


def _gpu_runner(
    ctx: Context, options: BatchOptions, gpus: list[str], console: Console
) -> tuple[Runner, dict[str, Any]]:
    """Several gradings per GPU: correctness together, timing one at a time through the GPU's lease."""
    per = jobs_at_once("cuda", options.jobs, max(1, len(gpus)))
    slots: list[str | None] = [g for g in gpus for _ in range(per)] if gpus else [None] * per
    # a grading may wait for the others' timing on its GPU: its wall clock allows for theirs
    ctx.wall_s *= per
    if per > 1:
        console.print(f"{per} submission(s) at once per GPU: correctness together, timing one at a time")
    return SubprocessRunner(ctx, slots), {"mode": "subprocess", "gpus": gpus, "per_gpu": per, "jobs": len(slots)}
