"""`grader grade` says each problem as it starts and ends, on stderr, and the table and files stay as they were."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from grader import ROOT
from grader.cli import main
from grader.engine.orchestrator.progress import ProblemEvent


def test_an_event_is_one_plain_line() -> None:
    assert ProblemEvent(problem="gelu", stage="started", cases=12).line() == "gelu: started (12 cases)"
    ended = ProblemEvent(problem="gelu", stage="finished", cases=12, cases_done=12, seconds=8.06, status="passed")
    assert ended.line() == "gelu: 12/12 cases, 8.1 s, passed"
    checked = ProblemEvent(problem="gelu", stage="checked", cases=12, cases_done=11, seconds=7.04)
    assert checked.line() == "gelu: 11/12 cases checked in 7.0 s"


def test_grade_prints_each_problem_as_it_starts_and_ends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["grade", str(ROOT / "student_template"), "--out", str(out), "--problems", "gelu"]) == 0
    captured = capsys.readouterr()
    result = json.loads((out / "result.json").read_text())  # the record is unchanged by the lines
    (gelu,) = result["problems"]
    cases = len(gelu["tests"])
    assert f"gelu: started ({cases} cases)" in captured.err
    assert re.search(rf"gelu: {cases}/{cases} cases checked in \d+\.\d s", captured.err), captured.err
    assert re.search(rf"gelu: {cases}/{cases} cases, \d+\.\d s, failed", captured.err), captured.err
    assert "gelu: started" not in captured.out and "total" in captured.out  # the table stays on stdout
