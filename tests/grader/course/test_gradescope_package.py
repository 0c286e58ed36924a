"""Gradescope's autograder zip: its files, and run_autograder grading an upload as Gradescope would."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from grader import cli
from grader.course.gradescope_package import SECRET_NAME
from grader.records import gradescope

ROOT = Path(__file__).resolve().parents[3]


def unpacked_autograder(tmp_path: Path, *extra: str) -> Path:
    """`grader gradescope-autograder`, then the zip laid out as Gradescope's /autograder."""
    assert cli.main(["gradescope-autograder", "--out", str(tmp_path / "build"), *extra]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(tmp_path / "build" / "autograder.zip") as zf:
        names = zf.namelist()
        assert {
            "setup.sh",
            "run_autograder",
            "pyproject.toml",
            SECRET_NAME,
            "assignment/assignment.toml",
            "grader/cli.py",
        } <= set(names)
        assert not any(n.startswith(("reference/", "tests/", "examples/")) for n in names)
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111
        zf.extractall(root / "source")
    return root


def run_autograder(root: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable, "GRADER_PROBLEMS": "gelu"}
    env.pop("GRADER_SECRET", None)
    proc = subprocess.run(
        ["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (root / "results" / "results.json").read_text()
    gradescope.GradescopeResults.model_validate_json(text)  # Gradescope's format, nothing else
    return json.loads(text)


def test_the_zip_grades_an_upload_on_the_cpu(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path)
    assert "hidden_cases.toml" in " ".join(p.name for p in (root / "source" / "assignment").iterdir())
    shutil.copytree(ROOT / "examples" / "submissions" / "correct", root / "submission")
    (root / "submission_metadata.json").write_text(
        json.dumps({"users": [{"email": "ada@uni.edu", "name": "Ada", "sid": "s-7"}]})
    )
    data = run_autograder(root)
    assert data["score"] == 10.0 and data["extra_data"]["status"] == "graded"
    assert any(t.get("visibility") == "after_published" for t in data["tests"])  # hidden CPU cases graded
    perf = [t for t in data["tests"] if "performance" in t["name"]]
    assert perf and all("status" not in t and "score" not in t for t in perf)


def test_a_bad_upload_still_gets_a_reason(tmp_path: Path) -> None:
    root = unpacked_autograder(tmp_path, "--public-only")
    assert not (root / "source" / "assignment" / "hidden_cases.toml").exists()
    (root / "submission").mkdir()
    (root / "submission" / "me.tar.gz").write_bytes(b"not a gzip stream at all")  # a broken `grader pack` upload
    data = run_autograder(root)
    assert data["score"] == 0.0 and data["output"].startswith("NOT GRADED") and "Reason:" in data["output"]
