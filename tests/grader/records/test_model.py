"""result.json round-trips through the pydantic model and Gradescope's format is well formed."""

from __future__ import annotations

import json
from pathlib import Path

from grader.records.model import SCHEMA_VERSION, Result
from grader.records.report import gradescope, write_result


def test_round_trip(graded_reference: Path) -> None:
    text = (graded_reference / "result.json").read_text()
    result = Result.model_validate_json(text)
    assert result.schema_version == SCHEMA_VERSION
    assert Result.model_validate_json(result.model_dump_json()) == result
    data = json.loads(text)
    for key in (
        "schema_version",
        "assignment",
        "submission",
        "environment",
        "score",
        "max_score",
        "duration_s",
        "problems",
    ):
        assert key in data
    assert set(data["assignment"]) >= {"name", "version"}
    assert set(data["submission"]) >= {"path", "sha256"}
    assert set(data["environment"]) >= {"device", "torch", "triton", "python"}


def test_gradescope_and_html(graded_reference: Path, tmp_path: Path) -> None:
    result = Result.model_validate_json((graded_reference / "result.json").read_text())
    gs = gradescope(result)
    assert gs["score"] == result.score
    assert all({"name", "visibility", "output"} <= set(t) for t in gs["tests"])
    # a verdict always comes with points; "not measured" (CPU) has neither
    assert all({"score", "max_score"} <= set(t) for t in gs["tests"] if "status" in t)
    assert any("status" not in t and "not measured" in t["name"] for t in gs["tests"])
    write_result(result, tmp_path)
    html = (tmp_path / "report.html").read_text()
    assert "GeLU" in html and f"{result.score:g}" in html
    assert json.loads((tmp_path / "gradescope" / "results.json").read_text())["score"] == result.score
