"""gradebook.csv and summary.json: empty cells for the ungraded, flags, no spreadsheet formulas."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from grader.engine.records import flags, gradebook
from grader.engine.records.model import (
    AssignmentRef,
    Finding,
    Performance,
    ProblemResult,
    Result,
    RunEnvironment,
    ShapeTiming,
    SubmissionRef,
    TestResult,
)


def result(
    status: str = "graded", error: str = "", problems: list[ProblemResult] | None = None, student: str = "s"
) -> Result:
    problems = (
        problems if problems is not None else [ProblemResult(name="gelu", score=10, max_score=15, status="passed")]
    )
    return Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64, student=student),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3"),
        score=sum(p.score for p in problems) if status == "graded" else 0.0,
        max_score=sum(p.max_score for p in problems),
        duration_s=1.0,
        graded_at="2026-01-01T00:00:00+00:00",
        status=status,  # type: ignore[arg-type]
        error=error,
        problems=problems,
    )


def cheat() -> ProblemResult:
    tests = [
        TestResult(
            name="gelu: cpu-square-fp32",
            status="failed",
            score=0,
            max_score=5,
            message="right values, but the kernel check failed: called aten::gelu",
        ),
        TestResult(
            name="gelu: kernel check",
            status="failed",
            score=0,
            max_score=0,
            message="called the PyTorch op(s) aten::gelu in case cpu-square-fp32",
        ),
    ]
    return ProblemResult(
        name="gelu",
        score=0,
        max_score=15,
        status="failed",
        tests=tests,
        findings=[Finding(file="gelu.py", line=3, rule="os-environ", message="reads os.environ")],
        kernel_check="called the PyTorch op(s) aten::gelu in case cpu-square-fp32",
    )


def test_an_ungraded_row_has_empty_scores_and_its_reason() -> None:
    row = gradebook.row(
        "bad",
        result(
            "error",
            "bad archive: '..' in a member name",
            [ProblemResult(name="gelu", score=0, max_score=15, status="error")],
        ),
        ["gelu"],
    )
    assert row["gelu"] is None and row["total"] is None and row["max"] == 15
    assert row["status"] == "error" and "bad archive" in row["error"] and row["flags"] == ""
    graded = gradebook.row("ok", result(), ["gelu"])
    assert graded["gelu"] == 10 and graded["total"] == 10 and graded["error"] == ""


def test_flags_tell_a_cheat_from_a_broken_kernel() -> None:
    caught = gradebook.row("c", result(problems=[cheat()]), ["gelu"])
    broken = gradebook.row(
        "b", result(problems=[ProblemResult(name="gelu", score=0, max_score=15, status="failed")]), ["gelu"]
    )
    assert caught["total"] == broken["total"] == 0
    assert caught["flags"] == "gelu: kernel check failed; gelu: scan findings" and broken["flags"] == ""


def test_timing_and_review_flags() -> None:
    shapes = [ShapeTiming(name="big", case="x", flags=["median below the roofline floor"])]
    timed = ProblemResult(
        name="softmax",
        score=15,
        max_score=25,
        status="passed",
        performance=Performance(status="flagged", score=0, max_score=10, shapes=shapes),
    )
    fast = ProblemResult(
        name="gelu",
        score=15,
        max_score=15,
        status="passed",
        performance=Performance(status="measured", score=5, max_score=5, review="ratio 2.3 above the review bound 1.5"),
    )
    found = flags.result_flags(result(problems=[fast, timed]))
    assert [(f.problem, f.kind, f.blocking) for f in found] == [
        ("gelu", "review", False),
        ("softmax", "timing flagged", True),
    ]
    assert "roofline" in found[1].detail and "2.3" in found[0].detail


@pytest.mark.parametrize("text", ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"])
def test_no_cell_can_start_a_formula(tmp_path: Path, text: str) -> None:
    rows = [
        gradebook.row(
            text, result("error", text, [ProblemResult(name="gelu", score=0, max_score=15, status="error")]), ["gelu"]
        )
    ]
    gradebook.write(tmp_path, rows, ["gelu"])
    with open(tmp_path / "gradebook.csv", newline="", encoding="utf-8") as handle:
        parsed = list(csv.DictReader(handle))
    # a carriage return is a control character: it goes, and what is left starts no formula
    assert parsed[0]["student"] == ("x" if text == "\rx" else "'" + text)
    assert parsed[0]["error"].startswith("'") or parsed[0]["error"] == text.strip()  # one_line strips a leading tab/CR
    assert parsed[0]["gelu"] == "" and parsed[0]["total"] == "" and float(parsed[0]["max"]) == 15


def test_negative_numbers_stay_numbers() -> None:
    assert gradebook.safe_cell(-1.5) == -1.5 and gradebook.safe_cell("alice") == "alice"


def test_summary_counts_and_mean_over_graded_only(tmp_path: Path) -> None:
    rows = [
        gradebook.row("ok", result(), ["gelu"]),
        gradebook.row("caught", result(problems=[cheat()]), ["gelu"]),
        gradebook.row(
            "bad",
            result("error", "bad archive", [ProblemResult(name="gelu", score=0, max_score=15, status="error")]),
            ["gelu"],
        ),
        gradebook.row("late", None, ["gelu"]),
    ]
    gradebook.write(tmp_path, rows, ["gelu"], {"assignment": "a"})
    data = json.loads((tmp_path / "summary.json").read_text())
    assert (data["students"], data["graded"], data["errors"], data["missing"], data["flagged"]) == (4, 2, 1, 1, 1)
    assert data["mean_total"] == 5.0  # (10 + 0) / 2: the error and the missing row are not zeros
    assert data["flags"] == {"kernel check failed": 1, "scan findings": 1}
    assert data["rows"][2]["total"] is None and data["rows"][2]["gelu"] is None


def test_a_syntax_error_is_an_error_not_a_scan_flag() -> None:
    """A file that does not parse fails its problem's import; its line stays in the record, no flag."""
    broken = ProblemResult(
        name="softmax",
        score=0,
        max_score=25,
        status="error",
        findings=[Finding(file="softmax.py", line=4, rule="syntax-error", message="does not parse: invalid syntax")],
    )
    assert gradebook.row("s", result(problems=[broken]), ["softmax"])["flags"] == ""


def test_a_cpu_total_says_what_a_gpu_measures_next_to_it() -> None:
    graded = result()
    graded.pending_score = 50
    row = gradebook.row("s", graded, ["gelu"])
    assert row["not_measured"] == "50 performance points are measured on a GPU"
    assert gradebook.row("g", result(), ["gelu"])["not_measured"] == ""


def test_flags_are_kept_in_the_record_once_and_read_from_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grading finishes a record with its flags (scoring.total); every writer and the
    leaderboard read them back instead of computing them again; an older record computes them."""
    from grader.engine.judge import scoring
    from grader.engine.records import gradescope
    from grader.engine.records.report import render_html

    finished = scoring.total(result(problems=[cheat()]))
    assert [f.label for f in finished.flags or []] == ["gelu: kernel check failed", "gelu: scan findings"]
    stored = Result.model_validate_json(finished.model_dump_json())
    assert stored.flags == finished.flags
    old = json.loads(finished.model_dump_json())
    del old["flags"]  # a record written before flags were kept
    assert flags.of(Result.model_validate(old)) == finished.flags

    def computed_again(record: Result) -> list[flags.Flag]:
        raise AssertionError("a writer computed the flags again")

    monkeypatch.setattr(flags, "result_flags", computed_again)
    assert gradebook.row("c", stored, ["gelu"])["flags"] == "gelu: kernel check failed; gelu: scan findings"
    assert "gelu: kernel check failed" in render_html(stored)
    assert gradescope.as_dict(stored)["extra_data"]["flags"] == ["gelu: kernel check failed", "gelu: scan findings"]
