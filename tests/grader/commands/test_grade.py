"""`grader grade` as the README describes it: in the repository it scores the hidden cases too."""

from __future__ import annotations

from grader import ROOT
from grader.engine.assignment.load import load_assignment
from grader.engine.spec.model import DEFAULT_SPEC, HIDDEN_NAME


def test_the_readme_says_what_grade_student_template_scores() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    row = next(line for line in lines if "`grader grade student_template" in line)
    assert "public part" not in row and "hidden cases too" in row and "--public-only" in row
    if (DEFAULT_SPEC.parent / HIDDEN_NAME).exists():  # the fact the row states, in this repository
        every = sum(len(p.cases) for p in load_assignment().problems)
        assert every > sum(len(p.cases) for p in load_assignment(hidden=False).problems)
