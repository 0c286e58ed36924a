"""The student export: nothing secret leaves, and `pytest handout` works inside it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import main
from grader.course.export_handout import scan_for_leaks

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "handout-repo"
    assert main(["export-handout", "--out", str(out)]) == 0
    return out


def run_in(export: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(export)}
    return subprocess.run([sys.executable, *args], cwd=export, env=env, capture_output=True, text=True, timeout=900)


def test_layout(export: Path) -> None:
    assert (export / "student_template" / "gelu.py").exists()
    assert (export / "handout" / "conftest.py").exists()
    assert (export / "assignment" / "assignment.toml").exists()
    assert (export / "pyproject.toml").exists() and (export / "README.md").exists()
    for absent in ("reference", "examples", "tests", "benchmarks", "docker", "assignment/hidden_cases.toml"):
        assert not (export / absent).exists(), absent


def test_no_hidden_case_or_reference_source_anywhere(export: Path) -> None:
    assert scan_for_leaks(export) == []
    hidden_names = [
        line.split('"')[1]
        for line in (ROOT / "assignment" / "hidden_cases.toml").read_text().splitlines()
        if line.startswith("name = ")
    ]
    text = "\n".join(p.read_text(errors="replace") for p in export.rglob("*") if p.is_file())
    assert hidden_names and not [n for n in hidden_names if f'"{n}"' in text]
    assert "def triton_gelu" in text  # the scan reads real files: the stubs are there


def test_the_scan_catches_a_planted_leak(export: Path, tmp_path: Path) -> None:
    planted = tmp_path / "planted"
    shutil.copytree(export, planted)
    (planted / "handout" / "oops.py").write_text((ROOT / "reference" / "gelu.py").read_text())
    assert any("reference source" in leak for leak in scan_for_leaks(planted))


def test_handout_runs_inside_the_export(export: Path, tmp_path: Path) -> None:
    probe = run_in(export, "-c", "import grader; print(grader.__file__)")
    assert str(export) in probe.stdout, probe.stdout + probe.stderr
    stubs = run_in(export, "-m", "pytest", "handout", "-q")
    assert stubs.returncode == 1 and "NotImplementedError" in stubs.stdout, stubs.stdout[-2000:]
    solved = tmp_path / "solved"
    shutil.copytree(ROOT / "examples" / "submissions" / "correct", solved)
    passing = run_in(export, "-m", "pytest", "handout", "-q", "--submission", str(solved))
    assert passing.returncode == 0, passing.stdout[-3000:]


def test_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("keep me")
    assert main(["export-handout", "--out", str(tmp_path)]) == 2
    assert (tmp_path / "x").read_text() == "keep me"
