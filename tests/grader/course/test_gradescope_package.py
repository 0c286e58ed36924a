"""Gradescope's autograder zip: its files and modes, run_autograder grading an upload as Gradescope
would (with this project's Python; tests/grader/course/test_gradescope_container.py runs it in a
clean Debian container), a results.json in every failure mode, and GPU grades merged by email or SID."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import cli
from grader.engine.judge import rescore
from grader.engine.records import gradescope, gradescope_gpu
from grader.engine.records.model import Performance, ProblemResult, Result, TestResult
from tests.grader.course import gradescope_schema

ROOT = Path(__file__).resolve().parents[3]
CORRECT = ROOT / "examples" / "submissions" / "correct"


def unpacked_autograder(tmp_path: Path, *extra: str) -> Path:
    """`grader gradescope-autograder`, then the zip laid out as Gradescope's /autograder."""
    assert cli.main(["gradescope-autograder", "--out", str(tmp_path / "build"), *extra]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "build" / "autograder.zip") as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    return root


def run_autograder(root: Path, python: str = sys.executable, **env: str) -> dict:
    environ = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": python, "GRADER_PROBLEMS": "gelu"}
    environ.pop("GRADER_SECRET", None)
    proc = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads((root / "results" / "results.json").read_text())
    assert gradescope_schema.check(data) == [], data  # Gradescope's documented format
    return data


def test_the_zip_carries_the_environment_and_only_the_grader_is_world_readable(tmp_path: Path) -> None:
    assert cli.main(["gradescope-autograder", "--out", str(tmp_path)]) == 0
    with zipfile.ZipFile(tmp_path / "autograder.zip") as zf:
        modes = {i.filename: i.external_attr >> 16 for i in zf.infolist()}
        requirements = zf.read("requirements.txt").decode().splitlines()
        readme = zf.read("README.txt").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "assignment/hidden_cases.toml", "grader/cli.py"} <= set(
        modes
    )
    assert not any(n.startswith(("reference/", "tests/", "examples/")) or "secret" in n for n in modes)
    assert all(mode & 0o077 == 0 for name, mode in modes.items() if not name.startswith("grader/")), modes
    assert all(mode == 0o644 for name, mode in modes.items() if name.startswith("grader/"))
    assert modes["run_autograder"] & 0o100 and modes["setup.sh"] & 0o100
    assert {"torch==2.11.0", "triton==3.6.0", "numpy>=1.26,<2.4", "einops==0.8.2"} <= set(requirements)
    assert "tomli>=2; python_version < '3.11'" in requirements
    assert "Ubuntu 22.04" in readme and "Tested on:" in readme


def test_the_zip_grades_an_upload_on_the_cpu(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path)
    shutil.copytree(CORRECT, root / "submission", dirs_exist_ok=True)
    (root / "submission_metadata.json").write_text(
        json.dumps({"users": [{"email": "ada@uni.edu", "name": "Ada", "sid": "s-7"}]})
    )
    data = run_autograder(root)
    assert data["score"] == 10.0 and data["extra_data"]["status"] == "graded"
    assert any(t.get("visibility") == "after_published" for t in data["tests"])  # hidden CPU cases graded
    perf = [t for t in data["tests"] if "performance" in t["name"]]
    assert perf and all("status" not in t and "score" not in t for t in perf)
    # what the student is told: hidden tests and the total, and where performance comes from
    assert "hidden tests were graded too" in data["output"] and "no total" in data["output"]
    assert "measured only on the course's GPUs" in data["output"]
    # everything but the grader's code is root's alone after the run (issue 29)
    for path in (root / "source" / "assignment" / "hidden_cases.toml", root / "results", root / "submission"):
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
    assert stat.S_IMODE((root / "source" / "assignment").stat().st_mode) & 0o077 == 0


def _fake_python(tmp_path: Path, body: str) -> str:
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!/usr/bin/env bash\n{body}\n")
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize("kind", ["environment", "time_limit", "grader_failed", "no_submission", "grading_crashed"])
def test_every_failure_still_writes_a_results_json(tmp_path: Path, kind: str) -> None:
    root = unpacked_autograder(tmp_path, "--public-only")
    shutil.copytree(CORRECT, root / "submission", dirs_exist_ok=True)
    python, env = sys.executable, {}
    if kind == "environment":
        (root / "source" / ".setup-failed").write_text("pip could not install requirements.txt")
    elif kind == "time_limit":
        python, env = _fake_python(tmp_path, "exec sleep 60"), {"GRADER_TIME_BUDGET_S": "1"}
    elif kind == "grader_failed":
        python = _fake_python(tmp_path, "exit 3")
    elif kind == "no_submission":
        shutil.rmtree(root / "submission")
        (root / "submission").mkdir()
    else:
        (root / "source" / "assignment" / "assignment.toml").write_text("[assignment\nbroken")
    data = run_autograder(root, python, **env)
    assert data["score"] == 0.0 and data["output"].startswith("NOT GRADED"), data
    assert data["extra_data"]["failure"] == kind
    assert "not a grade" in data["output"]


def test_a_grader_that_does_not_import_still_writes_a_results_json(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path, "--public-only")
    shutil.copytree(CORRECT, root / "submission", dirs_exist_ok=True)
    run_module = root / "source" / "grader" / "course" / "gradescope_run.py"
    run_module.write_text("raise ImportError('no module named tomllib, as on Python 3.10 without tomli')\n")
    data = run_autograder(root)
    assert data["extra_data"]["failure"] == "grader_failed" and "could not start" in data["output"]
    assert "tomllib" in data["output"]


def test_an_upload_that_is_not_a_submission_says_what_it_holds(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path, "--public-only")
    (root / "submission" / "notes.txt").write_text("my kernels are in the mail")
    data = run_autograder(root)
    assert data["extra_data"]["failure"] == "no_submission"
    assert "gelu.py" in data["output"] and "notes.txt" in data["output"]


def test_a_bad_archive_still_gets_a_reason(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path, "--public-only")
    assert not (root / "source" / "assignment" / "hidden_cases.toml").exists()
    (root / "submission" / "me.tar.gz").write_bytes(b"not a gzip stream at all")  # a broken `grader pack` upload
    data = run_autograder(root)
    assert data["score"] == 0.0 and data["output"].startswith("NOT GRADED") and "Reason:" in data["output"]


# -- GPU grades ---------------------------------------------------------------------------------


def _record(student: str, sha: str, device: str, perf: Performance) -> Result:
    test = TestResult(name="gelu: small", status="passed", score=10.0, max_score=10.0, visibility="public")
    problem = ProblemResult(name="gelu", score=10.0, max_score=15.0, status="passed", tests=[test], performance=perf)
    return Result.model_validate(
        {
            "assignment": {"name": "a", "version": "v"},
            "submission": {"path": "/s", "sha256": sha, "student": student},
            "environment": {
                "device": device,
                "torch": "2.11.0",
                "triton": "3.6.0",
                "python": "3.11",
                "interpreter": device == "cpu",
            },
            "score": 10.0,
            "max_score": 15.0,
            "duration_s": 1.0,
            "graded_at": "2026-05-01T00:00:00+00:00",
            "problems": [problem.model_dump()],
        }
    )


def test_gpu_grades_come_in_by_email_or_sid_for_the_same_files_only(tmp_path: Path) -> None:
    measured = Performance(status="measured", score=4.0, max_score=5.0, ratio_geomean=1.2)
    for student in ("s-7", "ada"):  # an export's id: the SID, else the email's local part
        (tmp_path / "grades" / student).mkdir(parents=True)
        record = _record(student, "abc", "NVIDIA H200", measured)
        (tmp_path / "grades" / student / "result.json").write_text(record.model_dump_json())
    grades = gradescope_gpu.collect(tmp_path / "grades", "v")
    cpu = _record("s-7", "abc", "cpu", Performance(status="not_measured", max_score=5.0))
    cpu.pending_score = 5.0
    users = [{"email": "Ada@uni.edu", "name": "Ada", "sid": "s-7"}]
    found = gradescope_gpu.match(grades, users, "abc")
    assert found.record is not None and "same files" in found.note
    data = gradescope.as_dict(rescore.with_gpu_performance(cpu, found.record))
    assert data["score"] == 14.0 and gradescope_schema.check(data) == []
    assert {"name": "gelu", "value": 1.2, "order": "desc"} in data["leaderboard"]
    other = gradescope_gpu.match(grades, users, "changed since")
    assert other.record is None and "other files" in other.note
    nobody = gradescope_gpu.match(grades, [{"email": "bob@uni.edu"}], "abc")
    assert nobody.record is None and "pending" in nobody.note
    assert "leaderboard" not in gradescope.as_dict(cpu)
