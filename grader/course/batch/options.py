"""`grader batch`'s options, typed and built once from the command line (grader.commands.batch).

Everything below the command reads these fields, never the argparse namespace, so a cluster
node, a test or another caller can start a batch without a command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grader.course.containers.docker import DEFAULT_MEMORY, DEFAULT_PIDS
from grader.engine.orchestrator.launch import GradeCommand
from grader.engine.spec.model import Problem

STARTUP_ALLOWANCE_S = 120.0
PER_PROBLEM_ALLOWANCE_S = 60.0


@dataclass(frozen=True)
class ContainerOptions:
    """--docker: the grading image and what each container may use."""

    image: str | None = None  # None: triton-kernels-grader:<version>[-cpu]
    memory: str = DEFAULT_MEMORY
    pids: int = DEFAULT_PIDS
    cpus: float | None = None  # None: this machine's cores shared out


@dataclass(frozen=True)
class RayOptions:
    """--backend ray: the cluster to join and what one grading asks it for."""

    address: str | None = None  # None: start a Ray instance on this machine
    resources: dict[str, float] | None = None  # None: one GPU on a GPU grading, one CPU otherwise


@dataclass(frozen=True)
class SlurmOptions:
    """--backend slurm: what each element of the job array asks sbatch for."""

    partition: str | None = None
    gpus_per_task: int | None = None
    cpus_per_task: int | None = None
    time_min: int | None = None
    sbatch: list[str] = field(default_factory=list)  # KEY=VALUE, or a bare KEY for a flag
    setup: list[str] = field(default_factory=list)  # shell lines run before each element


@dataclass(frozen=True)
class BatchOptions:
    """One batch: where the class is, where the results go, and how each student is graded."""

    submissions: Path
    out: Path
    grading: GradeCommand  # its device is the one asked for ("auto", "cpu" or "cuda"); its spec is the batch's
    regrade: bool = False
    retry_errors: bool = False
    #: folders under the submissions root that hold a submission_metadata.yml are Gradescope exports
    nested_exports: bool = False
    #: submissions at once (per GPU on a GPU); None: `--jobs auto` (grader/course/batch/concurrency.py)
    jobs: int | None = 1
    gpus: str | None = None  # "all" or indices such as "0,1"
    docker: ContainerOptions | None = None  # None: no containers
    container_timeout: float | None = None
    backend: str = "local"
    ray: RayOptions = field(default_factory=RayOptions)
    slurm: SlurmOptions = field(default_factory=SlurmOptions)

    @property
    def spec(self) -> Path:
        assert self.grading.spec is not None, "a batch's command names its spec"
        return self.grading.spec

    @property
    def public_only(self) -> bool:
        return self.grading.public_only

    def wall_limit(self, problems: list[Problem]) -> float:
        """Wall-clock limit for one student: every problem's limit, plus start-up, unless given."""
        if self.container_timeout:
            return float(self.container_timeout)
        per_problem = sum((self.grading.timeout or p.time_limit_s) + PER_PROBLEM_ALLOWANCE_S for p in problems)
        return STARTUP_ALLOWANCE_S + per_problem
