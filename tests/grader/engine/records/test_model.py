"""result.json round-trips through the pydantic model and Gradescope's format is well formed."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from grader.engine.records.model import SCHEMA_VERSION, Result, geomean
from grader.engine.records.report import gradescope, write_result


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


def _v1(problems: list[dict], **top: object) -> dict:
    """A record as a version 1 grader wrote it: facts in a test's name and an error's prefix."""
    return {
        "schema_version": 1,
        "assignment": {"name": "a", "version": "1"},
        "submission": {"path": "x", "sha256": "0" * 64},
        "environment": {"device": "cpu", "torch": "t", "triton": "t", "python": "3"},
        "score": 0.0,
        "max_score": 15.0,
        "duration_s": 1.0,
        "graded_at": "2026-01-01T00:00:00+00:00",
        "problems": problems,
        **top,
    }


def test_a_version_1_record_reads_with_its_kernel_check_as_a_field() -> None:
    cheat = {
        "name": "gelu",
        "score": 0,
        "max_score": 15,
        "status": "failed",
        "tests": [
            {"name": "gelu: kernel check", "status": "failed", "score": 0, "max_score": 0, "message": "aten::gelu"}
        ],
    }
    honest = {**cheat, "name": "softmax", "status": "passed", "tests": []}
    result = Result.model_validate(_v1([cheat, honest]))
    assert result.schema_version == SCHEMA_VERSION
    assert [p.kernel_check for p in result.problems] == ["aten::gelu", None]


def test_a_version_1_error_row_reads_with_its_kind() -> None:
    infra = Result.model_validate(_v1([], status="error", error="infrastructure: the node died"))
    bad = Result.model_validate(_v1([], status="error", error="bad archive: '..' in a member name"))
    assert (infra.error_kind, infra.error) == ("infrastructure", "the node died")
    assert (bad.error_kind, bad.error) == ("submission", "bad archive: '..' in a member name")


def test_a_version_2_record_keeps_its_fields_as_written() -> None:
    data = _v1([], status="error", error="infrastructure: literally", error_kind="submission", schema_version=2)
    result = Result.model_validate(data)
    assert (result.error_kind, result.error) == ("submission", "infrastructure: literally")


def test_a_record_with_the_removed_compile_aside_phase_still_reads() -> None:
    """`phases.compile_aside_s` (compiles made aside, removed) is dropped from records written before."""
    phases = {"worker_start_s": 1.5, "correctness_s": 4.0, "gpu_wait_s": 0.5, "compile_aside_s": 2.25}
    problem = {"name": "gelu", "score": 15, "max_score": 15, "status": "passed", "tests": [], "phases": phases}
    result = Result.model_validate_json(json.dumps(_v1([problem], schema_version=SCHEMA_VERSION)))
    read = result.problems[0].phases
    assert read is not None and (read.worker_start_s, read.correctness_s, read.gpu_wait_s) == (1.5, 4.0, 0.5)
    assert "compile_aside_s" not in read.model_dump()
    other = {**phases, "not_a_phase_s": 1.0}  # any other unknown field is still refused
    with pytest.raises(ValidationError, match="not_a_phase_s"):
        Result.model_validate(_v1([{**problem, "phases": other}], schema_version=SCHEMA_VERSION))


def test_geomean() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert math.isnan(geomean([]))
