"""What every runner needs to know about the batch, typed, with nothing of the command line in it.

The driver builds it from its BatchOptions; a cluster node rebuilds it from the driver's recipe
(grader.course.cluster.node), so one runner's code serves both. How a student is graded is a
`grader.engine.orchestrator.launch.GradeCommand`: the command line every runner runs, somewhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grader.course.batch.results import commit_result, error_result
from grader.course.batch.tasks import Task
from grader.engine.orchestrator.launch import GradeCommand
from grader.engine.records.model import ErrorKind, Result
from grader.engine.records.text import safe_text
from grader.engine.spec.model import Assignment, Problem


def selected_problems(assignment: Assignment, problems: tuple[str, ...] | list[str] | None) -> list[Problem]:
    return [p for p in assignment.problems if not problems or p.name in problems]


@dataclass
class Context:
    """What every runner needs to know about the batch: the spec loaded, and the command each student's
    grading runs (its device made concrete: "cpu" or "cuda", the kind of grading)."""

    assignment: Assignment
    problems: list[Problem]
    command: GradeCommand
    wall_s: float

    @property
    def device(self) -> str:
        return self.command.device

    @property
    def spec(self) -> Path:
        assert self.command.spec is not None, "a batch's command names its spec"
        return self.command.spec

    @property
    def public_only(self) -> bool:
        return self.command.public_only

    @property
    def hide(self) -> list[Path]:
        return list(self.command.hide)

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


def commit_or_error(ctx: Context, task: Task, result: Result) -> Result:
    """Commit `result`; one that cannot be written becomes this student's error row instead.

    Whatever a submission made of its result (issue 17: text no encoder takes), the batch goes
    on, and the error row is kept, so that a re-run does not stop at the same student either.
    """
    try:
        commit_result(result, task.out)
        return result
    except Exception as exc:  # noqa: BLE001 - any failure here is this student's, never the batch's
        reason = f"the grader could not write this student's result: {type(exc).__name__}: {safe_text(str(exc))[:300]}"
        error = ctx.error(task, reason, result.environment.isolation, result.duration_s)
        try:
            commit_result(error, task.out)
        except Exception:  # noqa: BLE001 - the gradebook still gets the row
            pass
        return error
