"""Resuming a batch: what to do with the stored results of a spec that has changed since."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.engine.judge.rescore import decide, rescore_result
from grader.engine.records.model import Result
from grader.engine.spec.model import Assignment


@dataclass
class ResumeChanges:
    """What a resumed batch did with stored results whose spec changed: it says so at the end."""

    assignment: Assignment
    rescored: list[str]
    regraded: dict[str, str]

    @classmethod
    def under(cls, assignment: Assignment) -> ResumeChanges:
        return cls(assignment, [], {})

    def settle(
        self, student: str, stored: Result | None, out: Path, commit: Callable[[Result, Path], None]
    ) -> Result | None:
        """The stored result to keep (re-scored and committed if needed), or None to grade again."""
        if stored is None:
            return None
        decision = decide(stored, self.assignment)
        if decision.action == "regrade":
            self.regraded[student] = decision.reason
            return None
        if decision.action == "rescore":
            stored = rescore_result(stored, self.assignment)
            commit(stored, out)
            self.rescored.append(student)
        return stored

    def as_meta(self) -> dict[str, object]:
        return {"rescored": self.rescored, "regraded": self.regraded}

    def lines(self) -> list[str]:
        out = []
        if self.rescored:
            out.append(
                f"the spec's points or thresholds changed: re-scored {len(self.rescored)} stored result(s) "
                f"without running them ({', '.join(self.rescored[:10])}{' …' if len(self.rescored) > 10 else ''})"
            )
        if self.regraded:
            reasons = sorted(set(self.regraded.values()))
            out.append(
                f"the spec's cases or rules changed ({'; '.join(reasons)}): graded {len(self.regraded)} "
                f"student(s) again"
            )
        return out
