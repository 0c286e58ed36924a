"""Spec fingerprints and re-scoring: points-only changes re-score stored verdicts, others regrade."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.judge import rescore
from grader.engine.judge.fingerprint import fingerprint
from grader.engine.records.model import (
    AssignmentRef,
    Finding,
    Performance,
    ProblemResult,
    Result,
    RunEnvironment,
    SubmissionRef,
    TestResult,
)
from grader.engine.spec.model import DEFAULT_SPEC, Assignment

GELU_POINTS = "points = { correctness = 10, performance = 5 }"


def edited_spec(tmp_path: Path, old: str, new: str, count: int | None = None) -> Path:
    """A copy of the assignment folder with one text replacement in assignment.toml (`count`: the
    first of several, in spec order)."""
    folder = tmp_path / f"assignment{len(list(tmp_path.iterdir()))}"
    shutil.copytree(DEFAULT_SPEC.parent, folder)
    spec = folder / "assignment.toml"
    text = spec.read_text()
    assert text.count(old) == 1 or (count and text.count(old) >= count), old
    spec.write_text(text.replace(old, new, count or -1))
    return spec


def stored(assignment: Assignment, statuses: list[str], cheat: str | None = None) -> Result:
    """A CPU result for gelu as grade() records it: one test per CPU case, in spec order."""
    problem = assignment.problem("gelu")
    cases = problem.suite_cases("cpu")
    assert len(statuses) == len(cases)
    share = problem.points.correctness / len(cases)
    tests = [
        TestResult(name=f"gelu: {c.name}", status=s, score=share if s == "passed" else 0.0, max_score=share)
        for c, s in zip(cases, statuses)
    ]  # type: ignore[arg-type]
    if cheat:
        tests.append(TestResult(name="gelu: kernel check", status="failed", score=0, max_score=0, message=cheat))
    score = sum(t.score for t in tests)
    gelu = ProblemResult(
        name="gelu",
        score=score,
        max_score=problem.max_score,
        status="passed",
        tests=tests,
        performance=Performance(status="not_measured", reason="no GPU", max_score=problem.points.performance),
        findings=[Finding(file="gelu.py", line=1, rule="r", message="m")],
        kernel_check=cheat or None,
    )
    return Result(
        assignment=AssignmentRef(
            name="triton-kernels", version=assignment.assignment.version, spec=fingerprint(assignment, ["gelu"], "cpu")
        ),
        submission=SubmissionRef(path="x", sha256="0" * 64),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3", interpreter=True),
        score=score,
        max_score=problem.max_score,
        pending_score=problem.points.performance,
        duration_s=1.0,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[gelu],
    )


def test_points_change_only_the_scoring_half(tmp_path: Path) -> None:
    base = load_assignment(DEFAULT_SPEC)
    points = load_assignment(edited_spec(tmp_path, GELU_POINTS, "points = { correctness = 20, performance = 5 }"))
    a, b = fingerprint(base, ["gelu"], "cpu"), fingerprint(points, ["gelu"], "cpu")
    assert a.grading == b.grading and a.scoring != b.scoring
    assert fingerprint(base, ["softmax"], "cpu") == fingerprint(
        points, ["softmax"], "cpu"
    )  # another problem: untouched


def test_tolerances_and_hidden_cases_change_the_grading_half(tmp_path: Path) -> None:
    base = fingerprint(load_assignment(DEFAULT_SPEC), ["gelu"], "cpu")
    tol = load_assignment(
        edited_spec(tmp_path, "float32 = { atol = 1e-5, rtol = 1e-5 }", "float32 = { atol = 1e-4, rtol = 1e-5 }")
    )
    assert fingerprint(tol, ["gelu"], "cpu").grading != base.grading
    public = load_assignment(DEFAULT_SPEC, hidden=False)
    assert fingerprint(public, ["gelu"], "cpu").grading != base.grading  # hidden CPU cases count
    gpu_case = load_assignment(edited_spec(tmp_path, "shape = [4096, 1000]", "shape = [4096, 1001]"))
    assert fingerprint(gpu_case, ["gelu"], "cpu").grading == base.grading  # a GPU case does not touch CPU grades
    assert (
        fingerprint(gpu_case, ["gelu"], "gpu").grading
        != fingerprint(load_assignment(DEFAULT_SPEC), ["gelu"], "gpu").grading
    )


def test_how_long_shapes_are_timed_changes_the_grading_half_only_off_its_default(tmp_path: Path) -> None:
    # the window and the precision decide measurements, not points: a GPU grading is redone, and a
    # spec that spells out the defaults keeps the fingerprint of one that does not
    base = fingerprint(load_assignment(DEFAULT_SPEC), ["gelu"], "gpu")
    line = "thresholds = { full_at = 0.9, zero_at = 0.3 }"
    for setting, same in (("window_s = 0.125", False), ("precision = 0.5", False), ("window_s = 0.25", True)):
        edited = load_assignment(edited_spec(tmp_path, line, line.replace(" }", f", {setting} }}"), count=1))
        got = fingerprint(edited, ["gelu"], "gpu")
        assert (got.grading == base.grading) is same, setting
        assert got.scoring == base.scoring, setting


def test_the_service_table_changes_neither_half() -> None:
    # quotas and the deadline decide who may submit to `grader serve`, never a verdict: no regrade
    base = load_assignment(DEFAULT_SPEC)
    edited = base.model_copy(update={"service": base.service.model_copy(update={"late": "closed"})})
    assert fingerprint(edited, ["gelu"], "gpu") == fingerprint(base, ["gelu"], "gpu")


def test_rescore_applies_new_points_to_stored_verdicts(tmp_path: Path) -> None:
    base = load_assignment(DEFAULT_SPEC)
    n = len(base.problem("gelu").suite_cases("cpu"))
    old = stored(base, ["passed"] * (n - 1) + ["failed"])
    assert rescore.decide(old, base).action == "keep"
    richer = load_assignment(edited_spec(tmp_path, GELU_POINTS, "points = { correctness = 20, performance = 5 }"))
    decision = rescore.decide(old, richer)
    assert decision.action == "rescore" and "points" in decision.reason
    new = rescore.rescore_result(old, richer)
    assert new.max_score == 25 and new.score == pytest.approx(20 * (n - 1) / n, abs=1e-3)
    assert new.problems[0].status == "partial" and new.pending_score == 5
    assert any(w.startswith("re-scored on ") for w in new.warnings)
    assert rescore.decide(new, richer).action == "keep"


def test_a_cheat_stays_at_zero_when_rescored(tmp_path: Path) -> None:
    base = load_assignment(DEFAULT_SPEC)
    n = len(base.problem("gelu").suite_cases("cpu"))
    old = stored(base, ["failed"] * n, cheat="called the PyTorch op(s) aten::gelu")
    richer = load_assignment(edited_spec(tmp_path, GELU_POINTS, "points = { correctness = 20, performance = 5 }"))
    new = rescore.rescore_result(old, richer)
    assert new.score == 0 and new.problems[0].status == "failed" and new.max_score == 25


def test_a_new_tolerance_means_regrade(tmp_path: Path) -> None:
    base = load_assignment(DEFAULT_SPEC)
    old = stored(base, ["passed"] * len(base.problem("gelu").suite_cases("cpu")))
    tol = load_assignment(
        edited_spec(tmp_path, "float32 = { atol = 1e-5, rtol = 1e-5 }", "float32 = { atol = 1e-4, rtol = 1e-5 }")
    )
    decision = rescore.decide(old, tol)
    assert decision.action == "regrade" and "tolerances" in decision.reason


def test_the_rescore_command_rewrites_results_and_gradebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grader import cli
    from grader.course.batch.results import commit_result
    from grader.engine.records import gradebook

    base = load_assignment(DEFAULT_SPEC)
    n = len(base.problem("gelu").suite_cases("cpu"))
    grades = tmp_path / "grades"
    commit_result(stored(base, ["passed"] * n), grades / "alice")
    gradebook.write(
        grades,
        [gradebook.row("alice", stored(base, ["passed"] * n), ["gelu"])],
        ["gelu"],
        {"problems": ["gelu"], "mode": "in-process"},
    )
    tol = edited_spec(tmp_path, "float32 = { atol = 1e-5, rtol = 1e-5 }", "float32 = { atol = 1e-4, rtol = 1e-5 }")
    assert cli.main(["rescore", str(grades), "--spec", str(tol)]) == 0
    assert "need grading again" in " ".join(capsys.readouterr().err.split())
    assert Result.model_validate_json((grades / "alice" / "result.json").read_text()).max_score == 15  # untouched
    richer = edited_spec(tmp_path, GELU_POINTS, "points = { correctness = 20, performance = 5 }")
    assert cli.main(["rescore", str(grades), "--spec", str(richer)]) == 0
    assert "re-scored 1 result(s)" in " ".join(capsys.readouterr().err.split())
    assert Result.model_validate_json((grades / "alice" / "result.json").read_text()).score == pytest.approx(20)
    book = (grades / "gradebook.csv").read_text()
    assert "alice,graded,20.0,20.0,25.0" in book
    assert json.loads((grades / "summary.json").read_text())["mode"] == "in-process"  # the batch's own facts kept
