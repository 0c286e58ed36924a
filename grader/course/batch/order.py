"""Which students a batch grading several at once starts first: the heaviest.

A batch ends when its last grading does, and one grading's own work cannot be shared out (on
the H200 a block-pointer FlashAttention compiled for 100 s and set its class's wall, session 19).
Started last, such a grading runs nearly alone at the end; started first, it runs beside the
others. What a grading will cost is not known before it runs, so it is read from the files:
each problem whose module differs from the student template's stub counts its time limit (the
spec's measure of how long the problem may take), and a stub or a missing file counts nothing.
"""

from __future__ import annotations

from pathlib import Path

from grader import ROOT
from grader.course.batch.tasks import Task
from grader.engine.spec.model import Problem

TEMPLATE = ROOT / "student_template"


def expected_cost(task: Task, problems: list[Problem], template: Path = TEMPLATE) -> float:
    """The time limits of the problems `task`'s folder implements (seconds; 0 for an error row)."""
    if task.folder is None:
        return 0.0
    cost = 0.0
    for problem in problems:
        mine, stub = task.folder / f"{problem.module}.py", template / f"{problem.module}.py"
        try:
            written = mine.read_bytes()
        except OSError:
            continue
        if not stub.is_file() or written != stub.read_bytes():
            cost += problem.time_limit_s
    return cost


def heaviest_first(tasks: list[Task], problems: list[Problem], template: Path = TEMPLATE) -> list[Task]:
    """`tasks` by expected cost, the largest first; ties keep their order (the students' ids)."""
    return sorted(tasks, key=lambda task: -expected_cost(task, problems, template))
