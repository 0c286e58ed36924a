"""Spec errors a person can act on: problems by name, real allowed ops, case sizes that can run,
and the command line printing locations whole (Rich would take `[gelu]` for markup)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import cli
from grader.engine.assignment.checks import MAX_CASE_ELEMENTS, aten_ops, unknown_ops
from grader.engine.assignment.load import load_assignment
from grader.engine.spec.model import DEFAULT_SPEC, SpecError

ROOT = Path(__file__).resolve().parents[4]


def edited(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of assignment/ with the first `old` in assignment.toml replaced."""
    folder = tmp_path / "assignment"
    shutil.copytree(DEFAULT_SPEC.parent, folder)
    spec = folder / "assignment.toml"
    text = spec.read_text()
    assert old in text
    spec.write_text(text.replace(old, new, 1))
    return spec


def error_of(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_assignment(path)
    return str(info.value)


def test_threshold_errors_name_the_problem(tmp_path: Path) -> None:
    message = error_of(
        edited(
            tmp_path, "thresholds = { full_at = 0.9, zero_at = 0.3 }", "thresholds = { full_at = 0.9, zero_at = 0.95 }"
        )
    )
    assert "problems[gelu].thresholds" in message and "problems.0" not in message


def test_an_allowed_op_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    message = error_of(edited(tmp_path, '"aten::view", ', '"aten::veiw", '))
    assert "kernel_rule.allowed_ops" in message and "'aten::veiw'" in message and "did you mean aten::view" in message


def test_an_allow_list_of_another_namespace_or_past_its_cap_is_refused(tmp_path: Path) -> None:
    assert "must be distinct aten:: op names" in error_of(edited(tmp_path / "a", '"aten::view", ', '"mkldnn::view", '))
    many = ", ".join(f'"aten::op{i}"' for i in range(41))
    assert "kernel_rule.allowed_ops" in error_of(edited(tmp_path / "b", '"aten::view", ', f"{many}, "))


def test_every_allowed_op_of_the_real_spec_exists() -> None:
    ops = aten_ops()
    assert {"aten::gelu", "aten::mul", "aten::mm"} <= ops and "aten::mul.Tensor" not in ops
    spec = load_assignment(DEFAULT_SPEC)
    assert unknown_ops(spec.kernel_rule.allowed_ops) == []
    assert all(p.rule is spec.kernel_rule for p in spec.problems)


def test_an_absurd_case_size_is_refused_with_the_limit(tmp_path: Path) -> None:
    message = error_of(edited(tmp_path, "shape = [64, 64]", "shape = [100000, 1000000]"))
    assert (
        "problems[gelu].cases[cpu-square-fp32]" in message
        and f"{MAX_CASE_ELEMENTS['cpu']:.3g}" in message
        and "cpu suite" in message
    )


def test_the_cli_prints_the_location_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = edited(tmp_path, "shape = [64, 64]", 'shape = "square"')
    assert cli.main(["grade", str(ROOT / "student_template"), "--spec", str(spec), "--out", str(tmp_path / "out")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "problems[gelu].cases[cpu-square-fp32].shape" in err


def test_the_service_table_is_checked_like_the_rest(tmp_path: Path) -> None:
    bare = error_of(edited(tmp_path, 'late = "refuse"', 'late = "refuse"\ndeadline = 2026-06-05T23:59:00'))
    assert "service.deadline" in bare and "needs a time zone" in bare
    typo = error_of(edited(tmp_path / "typo", "test = { per_hour = 6", "tests = { per_hour = 6"))
    assert "service.quota.tests" in typo
    spec = load_assignment(
        edited(tmp_path / "ok", 'late = "refuse"', 'late = "accept"\ndeadline = 2026-06-05T23:59:00Z')
    )
    assert spec.service.late == "accept" and spec.service.deadline is not None
    assert spec.service.quota["final"].per_day == 5  # the modes left out keep their defaults
