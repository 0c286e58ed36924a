"""The write-up's tables agree with the spec they quote (grader writeup --check)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import cli
from grader.course.writeup import WriteupError, blocks, regenerate, render_block
from grader.engine.assignment.load import load_assignment
from grader.engine.spec.model import DEFAULT_SPEC

WRITEUP = DEFAULT_SPEC.parent / "README.md"


def test_the_writeup_agrees_with_the_spec() -> None:
    spec = load_assignment(DEFAULT_SPEC, hidden=False)
    text = WRITEUP.read_text()
    _, changed = regenerate(text, spec)
    assert changed == [], f"assignment/README.md disagrees with assignment.toml in {changed}: run `grader writeup`"
    names = blocks(text)
    assert {"points", "limits", "thresholds", "kernel_rule"} <= set(names)
    assert {f"cases:{p.name}" for p in spec.problems} <= set(names), (
        "every problem's cases and tolerances are generated"
    )


def test_no_hidden_case_reaches_the_writeup() -> None:
    spec = load_assignment(DEFAULT_SPEC)
    hidden = [c for p in spec.problems for c in p.cases if c.visibility == "hidden"]
    assert hidden
    text = render_block("cases:gelu", load_assignment(DEFAULT_SPEC, hidden=False))
    assert "[1000003]" not in text  # a hidden GeLU shape


def test_a_spec_change_is_caught_and_rewritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "assignment"
    shutil.copytree(DEFAULT_SPEC.parent, folder)
    spec = folder / "assignment.toml"
    spec.write_text(spec.read_text().replace("time_limit_s = 600", "time_limit_s = 420").replace('"aten::t", ', ""))
    argv = ["writeup", "--spec", str(spec), "--writeup", str(folder / "README.md")]
    assert cli.main([*argv, "--check"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "limits" in err and "kernel_rule" in err and "points" not in err
    assert cli.main(argv) == 0
    text = (folder / "README.md").read_text()
    assert "fused GeLU 420 s" in text and "fused GeLU 600 s" not in text and "`permute`, `transpose`, `expand`" in text
    assert cli.main([*argv, "--check"]) == 0


def test_a_block_the_spec_cannot_render_is_an_error() -> None:
    with pytest.raises(WriteupError, match="cases:relu"):
        render_block("cases:relu", load_assignment(DEFAULT_SPEC, hidden=False))
