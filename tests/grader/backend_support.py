"""What the Ray and Slurm backend tests share: the local backend's gradebook of the bundled
examples (the one every backend must reproduce), and reading a gradebook back."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "submissions"
PROBLEMS = "gelu"  # one cheap problem keeps CI short; the four examples still differ on it


def start_batch(out: Path, *extra: str) -> subprocess.Popen[str]:
    """`grader batch` over the bundled examples, as a TA runs it (a child process; output in .stdout)."""
    argv = [
        sys.executable,
        "-m",
        "grader.cli",
        "batch",
        str(EXAMPLES),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--problems",
        PROBLEMS,
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL
    )


def batch(out: Path, *extra: str, timeout: float = 600) -> str:
    """Run `grader batch` to its end; its output, after checking that it succeeded."""
    proc = start_batch(out, *extra)
    try:
        text, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        text, _ = proc.communicate()
        raise AssertionError(f"grader batch ran past {timeout:g} s:\n{text[-3000:]}") from None
    assert proc.returncode == 0, f"grader batch exited with {proc.returncode}:\n{text[-4000:]}"
    return text


def stamps(out: Path) -> dict[str, int]:
    """Each student's result.json modification time: a resumed run that grades nothing leaves them alone."""
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/result.json")}


def rows(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text())))


def grades(out: Path) -> dict[str, tuple[str, ...]]:
    """student -> (status, each problem's score, total, max): what must not depend on the backend."""
    found = rows(out)
    students = [r["student"] for r in found]
    assert len(students) == len(set(students)), f"duplicated rows: {students}"
    return {r["student"]: (r["status"], *(r[p] for p in PROBLEMS.split(",")), r["total"], r["max"]) for r in found}


def local_gradebook(out: Path) -> dict[str, tuple[str, ...]]:
    """The local backend's grades of the examples, to compare each cluster backend with."""
    batch(out)
    return grades(out)
