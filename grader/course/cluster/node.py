"""One student graded on a cluster node, the way the local backend grades it.

The driver turns its batch context into a `Recipe` (plain data, picklable, none of the driver's
paths); the node loads its own copy of the spec, checks that it is the driver's (same version,
same hidden cases), rebuilds the batch context and runs grader.course.batch's subprocess or Docker runner
on the student's files. So a node grades exactly as `grader batch --jobs N` or `--docker` would on
one machine: the same `grader grade` command line (grader.engine.orchestrator.launch), in a child process with its
sandbox, or in the grading container.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import socket
import tarfile
from dataclasses import dataclass
from pathlib import Path

from grader.course.batch import archives
from grader.course.batch.context import Context, selected_problems
from grader.course.batch.discovery import Entry
from grader.course.batch.results import MAX_RESULT_BYTES
from grader.course.batch.runners import ROOT, DockerRunner, SubprocessRunner
from grader.course.batch.tasks import Task
from grader.engine.assignment.load import load_assignment
from grader.engine.orchestrator.launch import GradeCommand
from grader.engine.records.files import submission_files
from grader.engine.records.model import Result
from grader.engine.spec.model import Assignment

#: what a grading leaves in its output folder, relative to it; nothing else travels back
OUTPUTS = ("result.json", "report.html", "gradescope/results.json")


class NodeError(RuntimeError):
    """The node cannot grade as the driver asked (other spec, no image): not the student's fault."""


@dataclass
class DockerPlan:
    """--docker on a node: the image and the per-container limits the driver chose."""

    image: str
    memory: str
    pids: int
    cpus: float | None  # None: the node's cores shared out over its GPUs
    label: str


@dataclass
class Recipe:
    """Everything a node needs to grade like the driver; the secret travels here, never in argv."""

    spec: str  # relative to the grader checkout when the driver's spec lies in it
    spec_digest: str
    wall_s: float
    #: the driver's GradeCommand but for what is the node's own: its spec, its hidden paths and its
    #: kernel cache (left at their defaults here, set by `node_context`)
    command: GradeCommand
    docker: DockerPlan | None = None


def spec_digest(assignment: Assignment) -> str:
    """A hash of the loaded spec, hidden cases included: two machines agree on what is graded."""
    return hashlib.sha256(assignment.model_dump_json().encode()).hexdigest()


def recipe_for(ctx: Context, docker: DockerPlan | None = None) -> Recipe:
    """The driver's side: its batch context as a recipe for the nodes."""
    spec = Path(ctx.spec).resolve()
    try:
        spec_text = str(spec.relative_to(ROOT))
    except ValueError:
        spec_text = str(spec)
    command = ctx.command.model_copy(update={"spec": None, "hide": (), "kernel_cache": None})
    return Recipe(
        spec=spec_text, spec_digest=spec_digest(ctx.assignment), wall_s=ctx.wall_s, command=command, docker=docker
    )


def node_context(recipe: Recipe, hide: list[Path]) -> Context:
    """The node's side: the batch context rebuilt from its own checkout, checked against the driver's."""
    spec = Path(recipe.spec) if Path(recipe.spec).is_absolute() else ROOT / recipe.spec
    host = socket.gethostname()
    if not spec.is_file():
        raise NodeError(f"node {host} has no spec at {spec}: install the same grader checkout on every node")
    command = recipe.command.model_copy(update={"spec": spec, "hide": tuple(hide)})
    assignment = load_assignment(spec, hidden=False if command.public_only else None)
    if spec_digest(assignment) != recipe.spec_digest:
        raise NodeError(
            f"node {host} grades another spec than the driver ({assignment.assignment.name} "
            f"{assignment.assignment.version} at {spec}, "
            "or other hidden cases): put the same checkout and hidden_cases.toml on every node"
        )
    return Context(assignment, selected_problems(assignment, command.problems), command, recipe.wall_s)


def grade_folder(
    recipe: Recipe,
    student: str,
    source: str,
    sha: str,
    folder: Path,
    work: Path,
    gpu: str | None,
    hide: list[Path],
) -> Result:
    """Grade `folder` here with the local runner the recipe names; raw output goes to work/out.

    `hide`: what the student's worker must not see on this node (other students' files).
    """
    ctx = node_context(recipe, hide)
    task = Task(Entry(student, Path(source), "folder"), out=work / "committed", work=work, folder=folder, sha=sha)
    work.mkdir(parents=True, exist_ok=True)
    runner = SubprocessRunner(ctx, [gpu]) if recipe.docker is None else _docker_runner(ctx, recipe.docker, gpu)
    try:
        return runner.run(task, gpu)
    except BaseException:
        runner.stop()  # cancelled (Ray's KeyboardInterrupt, a signal): no grading outlives its task
        raise


def _docker_runner(ctx: Context, plan: DockerPlan, gpu: str | None) -> DockerRunner:
    from grader.course.containers.docker import docker_client
    from grader.course.containers.image import inspect_image
    from grader.course.containers.runner import ContainerLimits

    client = docker_client()
    info = inspect_image(client, plan.image)
    if info.version and info.version != ctx.assignment.assignment.version:
        raise NodeError(
            f"node {socket.gethostname()}: the image {plan.image} grades version {info.version}, not "
            f"{ctx.assignment.assignment.version}: rebuild it there"
        )
    gpus = len([d for d in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", d)]) if os.path.isdir("/dev") else 0
    cpus = plan.cpus or max(1.0, float(os.cpu_count() or 2) / max(1, gpus))  # the node's cores shared out over its GPUs
    limits = ContainerLimits(memory=plan.memory, pids=plan.pids, cpus=cpus, wall_s=ctx.wall_s)
    return DockerRunner(ctx, [gpu], client, plan.image, limits, plan.label)


# -- files across the wire ---------------------------------------------------------------------


def pack(folder: Path) -> bytes:
    """The submission's files (those its content hash covers) as a .tar.gz, for a node without the folder."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for file in submission_files(folder):
            tar.add(file, arcname=str(file.relative_to(folder)), recursive=False)
    return buf.getvalue()


def unpack(data: bytes, scratch: Path, modules: list[str]) -> Path:
    """The node's copy of a packed submission, unpacked with the archive rules of any upload."""
    archive = scratch / "submission.tar.gz"
    archive.write_bytes(data)
    folder = archives.unpack(archive, scratch / "submission")
    archive.unlink()
    return archives.find_submission_root(folder, modules)


def read_outputs(out: Path) -> dict[str, bytes]:
    """The grading's files, as bytes to ship back (each under the result size cap)."""
    files = {}
    for name in OUTPUTS:
        path = out / name
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_RESULT_BYTES:
            files[name] = path.read_bytes()
    return files


def write_outputs(files: dict[str, bytes], out: Path) -> None:
    """The shipped files into the driver's scratch folder; names other than OUTPUTS are dropped."""
    for name in OUTPUTS:
        if name in files:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(files[name])


def where(result: Result, node: str, gpu: str | None) -> Result:
    """Record the node (and GPU) that graded `result` in its device, which the gradebook shows."""
    base = result.environment.device.split(" (GPU ")[0]
    result.environment.device = f"{base} (node {node}, GPU {gpu})" if gpu else f"{base} (node {node})"
    return result
