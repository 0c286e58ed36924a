"""A TA's walk through a class: one bad archive, one cheat, one honest student, then spec changes.

End to end on the CPU through the real CLI (`grader batch --problems gelu`), reading only what a
TA reads: gradebook.csv, summary.json, each student's gradescope/results.json and the log lines.
"""

from __future__ import annotations

import csv
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.engine.records.model import Result
from grader.engine.spec.model import DEFAULT_SPEC

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "examples" / "submissions"


def book(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv", newline="", encoding="utf-8") as handle:
        return {r["student"]: r for r in csv.DictReader(handle)}


def gradescope(out: Path, student: str) -> dict:
    return json.loads((out / student / "gradescope" / "results.json").read_text())


def spec_with(tmp_path: Path, name: str, old: str, new: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(DEFAULT_SPEC.parent, folder)
    spec = folder / "assignment.toml"
    text = spec.read_text()
    assert text.count(old) == 1
    spec.write_text(text.replace(old, new))
    return spec


def batch(subs: Path, out: Path, spec: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert (
        cli.main(["batch", str(subs), "--out", str(out), "--device", "cpu", "--problems", "gelu", "--spec", str(spec)])
        == 0
    )
    return " ".join(capsys.readouterr().out.split())


def test_a_class_with_a_bad_archive_a_cheat_and_a_spec_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADER_SECRET", "walkthrough-secret")
    subs, out = tmp_path / "subs", tmp_path / "grades"
    shutil.copytree(EXAMPLES / "correct", subs / "alice")
    shutil.copytree(EXAMPLES / "cheating", subs / "carol")
    with zipfile.ZipFile(subs / "bob.zip", "w") as zf:
        zf.writestr("gelu.py", "x = 1\n")
        zf.writestr("../../escape.py", "pwned\n")

    log = batch(subs, out, DEFAULT_SPEC, capsys)
    rows = book(out)
    # the honest student: points, no flags
    assert rows["alice"]["status"] == "graded" and float(rows["alice"]["gelu"]) == 10 and rows["alice"]["flags"] == ""
    # the bad archive: not a zero, the reason in its own column
    assert rows["bob"]["status"] == "error" and rows["bob"]["gelu"] == "" and rows["bob"]["total"] == ""
    assert "bad archive" in rows["bob"]["error"] and float(rows["bob"]["max"]) == 15
    # the cheat: a zero, and the flag that says why, next to it
    assert rows["carol"]["status"] == "graded" and float(rows["carol"]["total"]) == 0
    assert "gelu: kernel check failed" in rows["carol"]["flags"]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["graded"], summary["errors"], summary["flagged"], summary["mean_total"]) == (2, 1, 1, 5.0)
    # Gradescope: the reason reaches the student; not measured is no verdict; two decimals
    assert (
        gradescope(out, "bob")["output"].startswith("NOT GRADED") and "bad archive" in gradescope(out, "bob")["output"]
    )
    alice = gradescope(out, "alice")
    assert alice["score"] == 10.0 and alice["output_format"] == "text"
    assert all("status" not in t for t in alice["tests"] if "not measured" in t["name"])
    assert "kernel check failed" in gradescope(out, "carol")["output"]
    # a log gets one plain line per student graded in this run
    assert "[2/3] alice: graded 10 / 15" in log or "[3/3] alice: graded 10 / 15" in log
    assert "carol: graded 0 / 15 (5 performance points are measured on a GPU); flags: gelu: kernel check failed" in log

    # staff double GeLU's correctness points under the same version: re-scored, nothing runs
    graded_at = Result.model_validate_json((out / "alice" / "result.json").read_text()).graded_at
    richer = spec_with(
        tmp_path,
        "richer",
        "points = { correctness = 10, performance = 5 }",
        "points = { correctness = 20, performance = 5 }",
    )
    log = batch(subs, out, richer, capsys)
    rows = book(out)
    assert (
        float(rows["alice"]["gelu"]) == 20 and float(rows["alice"]["max"]) == 25 and float(rows["carol"]["total"]) == 0
    )
    assert rows["bob"]["total"] == "" and rows["carol"]["flags"].startswith("gelu: kernel check failed")
    alice_result = Result.model_validate_json((out / "alice" / "result.json").read_text())
    assert alice_result.graded_at == graded_at and any(w.startswith("re-scored on ") for w in alice_result.warnings)
    assert gradescope(out, "alice")["score"] == 20.0
    summary = json.loads((out / "summary.json").read_text())
    assert (
        sorted(summary["spec_changes"]["rescored"]) == ["alice", "carol"] and summary["spec_changes"]["regraded"] == {}
    )
    assert "re-scored 2 stored result(s)" in log

    # a tolerance changes: verdicts may differ, so both are graded again, and the batch says so
    looser = spec_with(
        tmp_path, "looser", "float32 = { atol = 1e-5, rtol = 1e-5 }", "float32 = { atol = 2e-5, rtol = 1e-5 }"
    )
    log = batch(subs, out, looser, capsys)
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(summary["spec_changes"]["regraded"]) == ["alice", "carol"]
    assert "tolerances" in summary["spec_changes"]["regraded"]["alice"] and "graded 2 student(s) again" in log
    assert Result.model_validate_json((out / "alice" / "result.json").read_text()).graded_at >= graded_at
    assert float(book(out)["alice"]["gelu"]) == 10 and "bad archive" in book(out)["bob"]["error"]
