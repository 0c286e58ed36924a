"""Gradescope's results.json (its format, rounding, "not measured", ungradable entries) and its metadata."""

from __future__ import annotations

import json
from pathlib import Path

from grader.course.batch import gradescope_metadata
from grader.course.batch.discovery import read_gradescope_metadata
from grader.engine.records import gradescope
from grader.engine.records.model import (
    AssignmentRef,
    Performance,
    ProblemResult,
    Result,
    RunEnvironment,
    SubmissionRef,
    TestResult,
)


def result(**changes: object) -> Result:
    tests = [
        TestResult(
            name=f"gelu: case{i}",
            status="passed",
            score=3.3333,
            max_score=3.3333,
            visibility="hidden" if i else "public",
        )
        for i in range(3)
    ]
    gelu = ProblemResult(
        name="gelu",
        score=9.9999,
        max_score=15,
        status="passed",
        tests=tests,
        performance=Performance(
            status="not_measured", reason="no GPU: performance is measured only on a CUDA GPU", max_score=5
        ),
    )
    base = Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3", interpreter=True),
        score=39.9998,
        max_score=120,
        pending_score=5,
        duration_s=12.7,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[gelu],
    )
    return base.model_copy(update=changes)


def test_the_file_matches_gradescopes_format_and_rounds_scores() -> None:
    data = json.loads(gradescope.results_json(result()))
    gradescope.GradescopeResults.model_validate(data)  # extra="forbid": no key Gradescope does not know
    assert data["score"] == 40.0 and data["output_format"] == "text" and data["test_output_format"] == "text"
    assert data["output"].startswith("40 / 120")
    scored = [t for t in data["tests"] if "score" in t]
    assert all(t["score"] == round(t["score"], 2) and t["max_score"] == round(t["max_score"], 2) for t in scored)
    assert [t["visibility"] for t in data["tests"][:3]] == ["visible", "after_published", "after_published"]


def test_a_compile_only_case_is_named_so() -> None:
    compiled = TestResult(name="gelu: big", status="passed", score=0, max_score=1, compile_only=True)
    changed = result()
    changed.problems[0].tests.append(compiled)
    names = [t["name"] for t in json.loads(gradescope.results_json(changed))["tests"]]
    assert "gelu: big (compile-only)" in names and "gelu: case0" in names


def test_not_measured_is_never_a_failed_test() -> None:
    perf = [t for t in gradescope.as_dict(result())["tests"] if "performance" in t["name"]]
    assert len(perf) == 1
    assert "status" not in perf[0] and "score" not in perf[0] and "max_score" not in perf[0]
    assert "not measured" in perf[0]["name"] and "5 points pending" in perf[0]["output"]


def test_an_ungradable_entry_says_why() -> None:
    bad = result(status="error", error="bad archive: member '../x.py' leaves the folder", score=0.0, problems=[])
    data = gradescope.as_dict(bad)
    assert data["output"].startswith("NOT GRADED") and "../x.py" in data["output"]
    assert data["extra_data"]["status"] == "error"


def test_a_review_flag_reaches_the_student_and_the_staff() -> None:
    review = Performance(
        status="measured",
        score=5,
        max_score=5,
        ratio_geomean=2.4,
        review="speed ratio 2.4 is above the review bound 1.5",
    )
    reviewed = result(
        problems=[ProblemResult(name="gelu", score=15, max_score=15, status="passed", performance=review)], score=15.0
    )
    data = gradescope.as_dict(reviewed)
    assert "gelu: review" in data["output"] and data["extra_data"]["flags"] == ["gelu: review"]
    perf = next(t for t in data["tests"] if t["name"] == "gelu: performance")
    assert perf["status"] == "passed" and "under review" in perf["output"]
    assert data["leaderboard"][0] == {"name": "gelu", "value": 2.4, "order": "desc"}


def test_export_metadata_is_read_as_yaml(tmp_path: Path) -> None:
    path = tmp_path / "submission_metadata.yml"
    path.write_text(
        "---\n"
        "submission_101:\n"
        "  :submitters:\n"
        "  - :name: 'Alice: Liddell'\n"  # a colon inside a quoted value: a line regex would stumble
        "    :sid: '1234'\n"
        "  :created_at: 2026-01-01 10:00:00.000000000 -08:00\n"
        "  :score: !ruby/object:BigDecimal 18:0.5e2\n"
        "submission_102:\n"
        "  :submitters:\n"
        "  - :name: Bob\n"
        "    :email: bob@uni.edu\n"
        "    :sid:\n"
        "  - {':name': Carol, ':sid': 99}\n"
    )
    assert read_gradescope_metadata(path) == {"submission_101": "1234", "submission_102": "bob+99"}
    path.write_text("[unclosed")
    assert read_gradescope_metadata(path) == {}


def test_autograder_metadata_json(tmp_path: Path) -> None:
    path = tmp_path / "submission_metadata.json"
    path.write_text(
        json.dumps(
            {
                "id": 1,
                "users": [{"email": "a@u.edu", "id": 7, "name": "A", "sid": "s-1"}, {"email": "b@u.edu", "name": "B"}],
            }
        )
    )
    assert gradescope_metadata.read_submission_metadata(path) == "s-1+b"
    path.write_text("not json")
    assert gradescope_metadata.read_submission_metadata(path) is None
