"""What `grader grade` tells as it goes: each problem as it starts and as it ends.

`grader grade student_template` once printed nothing for 146 s and then the table; these events
let the command say which problem is running, and how far each got, as plain lines.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from grader.engine.records.model import ProblemStatus, TestResult


class ProblemEvent(BaseModel):
    """One problem started, its cases checked (`cases_done` of `cases` in its own `seconds`), or
    ended with its status (timing, if any, done too: `seconds` from its start to its end)."""

    problem: str
    stage: Literal["started", "checked", "finished"]
    cases: int
    cases_done: int = 0
    seconds: float = 0.0
    status: ProblemStatus | None = None

    def line(self) -> str:
        """The event as one plain line ("gelu: 12/12 cases, 8.1 s, passed")."""
        if self.stage == "started":
            return f"{self.problem}: started ({self.cases} case{'' if self.cases == 1 else 's'})"
        if self.stage == "checked":  # as each problem's cases end: problems run one after another on a CPU
            return f"{self.problem}: {self.cases_done}/{self.cases} cases checked in {self.seconds:.1f} s"
        text = f"{self.problem}: {self.cases_done}/{self.cases} cases, {self.seconds:.1f} s"
        return text + (f", {self.status}" if self.status else "")


def cases_done(tests: list[TestResult]) -> int:
    """The cases that ran to a verdict (a case left when the time ran out is skipped)."""
    return sum(t.status != "skipped" for t in tests)
