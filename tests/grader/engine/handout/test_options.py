"""`pytest handout --submission`: a folder that is not there is one usage error before any test."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grader import ROOT


def _handout(submission: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pytest", "handout", "--submission", str(submission), "-q"]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_a_missing_submission_folder_fails_once(tmp_path: Path) -> None:
    missing = tmp_path / "stduent_template"
    run = _handout(missing)
    output = run.stdout + run.stderr
    assert run.returncode == 4, output  # pytest's usage error: no test ran
    assert output.count(f"no such folder: {missing}") == 1 and "has no gelu.py" not in output
