"""`grader batch --backend ray`: each student a Ray task on whichever node Ray picks.

The task carries the student's files (a .tar.gz of what the content hash covers) and a recipe of
the batch (grader.course.cluster.node); on the node it runs `grader grade` as a subprocess, or the
grading container with --docker, and returns result.json, report.html and gradescope/ as bytes
in its return object: the driver needs no filesystem shared with the nodes. The driver checks
what came back as it checks a local run, and grader.course.batch commits it, so resume, atomic files and
error rows are the local backend's. OUT/.ray/tasks.jsonl has a line per task: when it was sent,
started and ended on its node, and came back (benchmarks/cluster_overhead.py reads it).

Failures: a node that dies (or a worker process that is killed) is a system failure, and Ray runs
the task again elsewhere, up to RETRIES times. Whatever the student's code does ends in a result
(an error row) and is never retried. A task that still fails becomes an infrastructure error row,
which the next run grades again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from grader.course.batch.concurrency import CORES_PER_GRADING
from grader.course.batch.context import Context
from grader.course.batch.errors import BatchError
from grader.course.batch.options import BatchOptions
from grader.course.batch.results import BadResult, collect_result
from grader.course.batch.tasks import Task
from grader.course.cluster import node
from grader.course.containers.docker import Cancelled
from grader.engine.records.model import Result

RETRIES = 3  # runs of a task after a system failure (its node or worker process died)
IN_FLIGHT = 256  # tasks handed to Ray at once; Ray queues them until a node has room


#: gradings that share one GPU by default: their correctness runs together, their timing one at a
#: time through the node's GPU lease (grader/engine/orchestrator/gpu_lease.py)
PER_GPU = 4


def task_options(device: str, given: dict[str, float] | None) -> dict[str, Any]:
    """Ray's options for one grading: a share of a GPU on a GPU grading, CPU only otherwise."""
    on_gpu = {"CPU": float(CORES_PER_GRADING), "GPU": 1.0 / PER_GPU}
    wanted = dict(given) if given is not None else (on_gpu if device == "cuda" else {"CPU": 1.0})
    options: dict[str, Any] = {"num_cpus": wanted.pop("CPU", 0.0), "num_gpus": wanted.pop("GPU", 0.0)}
    if wanted:
        options["resources"] = wanted
    return options


# -- on the node ---------------------------------------------------------------------------------


def grade_on_node(
    recipe: node.Recipe, student: str, source: str, sha: str, modules: list[str], archive: bytes
) -> dict[str, Any]:
    """The Ray task: unpack, grade with the local runner, return the record and its files' bytes."""
    import ray

    started = time.time()
    node_id = ray.get_runtime_context().get_node_id()
    here = f"{socket.gethostname()}:{node_id[:8]}"
    gpu = ",".join(str(g) for g in ray.get_gpu_ids()) or None
    scratch = Path(tempfile.mkdtemp(prefix=f"grader-ray-{student}-"))  # 0700: other students' workers cannot look in
    try:
        folder = node.unpack(archive, scratch, modules)
        work = scratch / "work"
        result = node.grade_folder(recipe, student, source, sha, folder, work, gpu, hide=[scratch])
        files = node.read_outputs(work / "out") if result.status == "graded" else {}
        return {
            "result": result.model_dump_json(),
            "files": files,
            "node": here,
            "gpu": gpu,
            "started": started,
            "ended": time.time(),
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- on the driver -------------------------------------------------------------------------------


class RayRunner:
    """grader.course.batch's runner interface over Ray tasks; run() blocks on one student's task."""

    parallel = True

    def __init__(self, ctx: Context, recipe: node.Recipe, options: dict[str, Any], log: Path) -> None:
        import ray

        self.ctx = ctx
        self.log = log  # a line per task: when it was sent, started and ended on its node, came back
        self.slots: list[str | None] = [None] * IN_FLIGHT
        self.recipe = ray.put(recipe)  # once, not once per student
        self.remote = ray.remote(grade_on_node).options(max_retries=RETRIES, retry_exceptions=False, **options)
        self.modules = [p.module for p in ctx.problems]
        self._live: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self, task: Task, slot: str | None) -> Result:
        import ray
        from ray.exceptions import RayError, RayTaskError, TaskCancelledError

        assert task.folder is not None
        if self.stopping.is_set():
            raise Cancelled()
        started, sent = time.monotonic(), time.time()
        ref = self.remote.remote(
            self.recipe, task.student, str(task.entry.source), task.sha, self.modules, node.pack(task.folder)
        )
        with self._lock:
            self._live[task.student] = ref
        try:
            reply = ray.get(ref)
        except (TaskCancelledError, RayError) as exc:
            if self.stopping.is_set() or isinstance(exc, TaskCancelledError):
                raise Cancelled() from None
            cause = getattr(exc, "cause", None) if isinstance(exc, RayTaskError) else None
            reason = (
                f"{type(cause).__name__}: {cause}"
                if cause is not None
                else f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
            )
            return self.ctx.infra_error(task, f"ray: {reason}", "none", time.monotonic() - started)
        finally:
            with self._lock:
                self._live.pop(task.student, None)
        line = {
            "student": task.student,
            "node": reply["node"],
            "sent": sent,
            "started": reply["started"],
            "ended": reply["ended"],
            "received": time.time(),
        }
        with self._lock, open(self.log, "a") as handle:
            handle.write(json.dumps(line) + "\n")
        return self.receive(task, reply, time.monotonic() - started)

    def receive(self, task: Task, reply: dict[str, Any], elapsed: float) -> Result:
        """A node's reply, checked like a local run's files; the node and GPU go into the record."""
        result = Result.model_validate_json(reply["result"])
        if result.status == "graded":
            out = task.work / "out"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            node.write_outputs(reply["files"], out)
            try:
                result = collect_result(out, task, self.ctx.assignment)
            except BadResult as exc:
                return self.ctx.infra_error(
                    task, f"node {reply['node']} sent back no usable result: {exc}", "none", elapsed
                )
        result.submission.path = str(task.entry.source)
        result.submission.student = task.student
        return node.where(result, reply["node"], reply["gpu"])

    def stop(self) -> None:
        """Ctrl-C: cancel every task still out; each node's grading is stopped with it."""
        import ray

        self.stopping.set()
        with self._lock:
            live = list(self._live.values())
        for ref in live:
            try:
                ray.cancel(ref, recursive=True)
            except Exception:  # already finished, or its node is gone
                pass


def connect(address: str | None) -> dict[str, Any]:
    """Join the cluster at `address`, or start a Ray instance here; returns what it offers."""
    import ray

    if not ray.is_initialized():
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(address="local", include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise BatchError(
                f"cannot reach the Ray cluster at {address}: {exc}" if address else f"cannot start Ray here: {exc}"
            ) from None
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    return {"nodes": len(nodes), "resources": ray.cluster_resources()}


def make_runner(ctx: Context, batch: BatchOptions, console: Console) -> tuple[RayRunner, dict[str, Any]]:
    try:
        import ray  # noqa: F401
    except ImportError:
        raise BatchError(
            "--backend ray needs Ray on this machine and on every node: pip install "
            "'triton-kernels-assignment[cluster]'"
        ) from None
    out = batch.out
    plan = None
    if batch.docker is not None:
        from grader.course.containers.image import image_tag

        image = batch.docker.image or image_tag(ctx.assignment.assignment.version, cpu=ctx.device != "cuda")
        label = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]
        plan = node.DockerPlan(image, batch.docker.memory, batch.docker.pids, batch.docker.cpus, label)
    options = task_options(ctx.device, batch.ray.resources)
    connecting = time.monotonic()
    cluster = connect(batch.ray.address)
    connect_s = round(time.monotonic() - connecting, 1)
    wanted = {"CPU": options["num_cpus"], "GPU": options["num_gpus"], **options.get("resources", {})}
    short = [
        f"{k} (a grading asks for {v:g}, the cluster has {cluster['resources'].get(k, 0):g})"
        for k, v in wanted.items()
        if v > cluster["resources"].get(k, 0)
    ]
    if short:
        raise BatchError(
            f"no node of the Ray cluster can run a grading: too little {', '.join(short)}; see --ray-resources"
        )
    offered = ", ".join(f"{k} {v:g}" for k, v in sorted(cluster["resources"].items()) if k in wanted)
    console.print(
        f"ray: {cluster['nodes']} node(s), {offered} ({'joined' if batch.ray.address else 'started'} in "
        f"{connect_s:g} s)"
    )
    if 0 < options["num_gpus"] < 1:
        ctx.wall_s *= math.ceil(1 / options["num_gpus"])  # a grading may wait for the others' timing on its GPU
    log = out / ".ray" / "tasks.jsonl"
    log.parent.mkdir(exist_ok=True)
    runner = RayRunner(ctx, node.recipe_for(ctx, plan), options, log)
    meta = {
        "mode": "ray" + (" docker" if plan else ""),
        "ray_address": batch.ray.address or "local",
        "nodes": cluster["nodes"],
        "request": wanted,
        "connect_s": connect_s,
        "gpus": [],
    }
    if plan:
        meta["image"] = plan.image
    return runner, meta
