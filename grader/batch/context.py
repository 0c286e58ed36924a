"""What every runner needs to know about the batch, typed, with nothing of the command line in it.

The driver builds it from its BatchOptions; a cluster node rebuilds it from the driver's recipe
(grader.cluster.node), so one runner's code serves both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.batch.results import error_result
from grader.batch.tasks import Task
from grader.orchestrator.options import GradeOptions
from grader.records.model import ErrorKind, Result
from grader.spec.model import Assignment, Problem


def selected_problems(assignment: Assignment, problems: list[str] | None) -> list[Problem]:
    return [p for p in assignment.problems if not problems or p.name in problems]


@dataclass
class Context:
    """What every runner needs to know about the batch."""

    assignment: Assignment
    problems: list[Problem]
    options: GradeOptions
    spec: Path  # the assignment.toml graded against (a child `grader grade` loads it again)
    public_only: bool
    device: str  # "cpu" or "cuda": the kind of grading (interpreter or real kernels)
    wall_s: float
    hide: list[Path]

    def error(
        self,
        task: Task,
        reason: str,
        isolation: str,
        duration: float = 0.0,
        gpu: str | None = None,
        kind: ErrorKind = "submission",
    ) -> Result:
        """An error row for what the submission did (a bad archive: kept when the batch resumes)."""
        result = error_result(self.assignment, task, reason, self.problems, self.device, isolation, duration, kind)
        if gpu is not None:
            result.environment.device = f"cuda (GPU {gpu})"
        return result

    def infra_error(
        self, task: Task, reason: str, isolation: str, duration: float = 0.0, gpu: str | None = None
    ) -> Result:
        """An error row that says nothing about the submission (the grading broke): graded again on resume."""
        return self.error(task, reason, isolation, duration, gpu, kind="infrastructure")

    def grade_args(self) -> list[str]:
        """`grader grade` options shared by the subprocess and container runners."""
        out = ["--device", self.device]
        if self.options.timeout:
            out += ["--timeout", f"{self.options.timeout:g}"]
        if self.options.problems:
            out += ["--problems", ",".join(self.options.problems)]
        if self.public_only:
            out.append("--public-only")
        if not self.options.time_performance:
            out.append("--no-timing")
        if self.options.profile:
            out.append("--profile")
        if self.options.parallel:
            out += ["--parallel", str(self.options.parallel)]
        if self.options.kernel_cache is None:
            out.append("--no-kernel-cache")
        return out
