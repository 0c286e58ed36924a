"""Adding a problem touches no grader code: a spec entry, a folder under grader/engine/problems/, one file
in each of student_template/, reference/ and handout/, and a section of the write-up.

A toy fifth problem (ReLU, the files in tests/grader/new_problem/) is added to a copy of the course
and graded end to end on the CPU: `grader grade` through the real sandboxed worker and Triton's
interpreter, and `pytest handout` on its public cases. The copy carries its own grader package, as
a course does: the worker sees only the package it was started from (grader/engine/sandbox/plan.py,
runtime_paths), so a problem's folder lives inside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.spec.model import SpecError
from tests.grader.problem_homes import missing

ROOT = Path(__file__).resolve().parents[4]
FIXTURE = Path(__file__).resolve().parents[2] / "new_problem"
#: copied whole from this course, then the toy problem's own file added to each
FOLDERS = ("grader", "student_template", "reference", "handout")
GRADE = "import sys; from grader.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This course with the toy problem added the documented way, and nothing else changed."""
    root = tmp_path_factory.mktemp("course")
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(FIXTURE / folder, root / folder, dirs_exist_ok=True)
    (root / "assignment").mkdir()
    for name, addition in (("assignment.toml", "spec_entry.toml"), ("README.md", "writeup_section.md")):
        text = (ROOT / "assignment" / name).read_text() + "\n" + (FIXTURE / addition).read_text()
        (root / "assignment" / name).write_text(text)
    return root


def run(course: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command of the copied course, importing its grader (not this checkout's)."""
    env = {**os.environ, "PYTHONPATH": str(course)}
    return subprocess.run([sys.executable, *argv], cwd=course, env=env, capture_output=True, text=True, timeout=600)


def test_every_problem_of_this_course_has_all_its_files() -> None:
    assert missing(ROOT) == []


def test_the_toy_course_has_all_its_files_and_names_what_is_missing(course: Path, tmp_path: Path) -> None:
    assert missing(course) == []
    bare = tmp_path / "bare"
    (bare / "assignment").mkdir(parents=True)
    shutil.copy(course / "assignment" / "assignment.toml", bare / "assignment")
    gaps = [gap for gap in missing(bare) if gap.startswith("relu:")]
    assert gaps == [
        "relu: no grading folder grader/engine/problems/relu/",
        "relu: student_template/relu.py does not define triton_relu",
        "relu: reference/relu.py does not define triton_relu",
        "relu: no handout/test_relu.py with PROBLEM = 'relu'",
        "relu: the write-up has no section assignment/README.md#5-relu",
    ]


def test_a_spec_naming_a_problem_without_a_folder_says_which_folder(course: Path) -> None:
    """This checkout's grader has no relu folder: the toy spec is refused, naming the folder."""
    with pytest.raises(
        SpecError, match=r"'relu' is not a known problem: no grading folder grader/engine/problems/relu/"
    ):
        load_assignment(course / "assignment" / "assignment.toml", hidden=False)


def test_the_toy_problem_is_graded_end_to_end(course: Path) -> None:
    spec = course / "assignment" / "assignment.toml"
    for submission, score in (("reference", 4), ("student_template", 0)):
        out = course / "grades" / submission
        proc = run(
            course,
            "-c",
            GRADE,
            "grade",
            submission,
            "--spec",
            str(spec),
            "--device",
            "cpu",
            "--problems",
            "relu",
            "--out",
            str(out),
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        (relu,) = json.loads((out / "result.json").read_text())["problems"]
        assert relu["name"] == "relu" and relu["score"] == score, relu
        assert {"relu: cpu-square-fp32", "relu: cpu-ragged-fp16"} <= {t["name"] for t in relu["tests"]}, relu["tests"]
        if score == 0:
            assert all("NotImplementedError" in t["message"] for t in relu["tests"]), relu["tests"]


def test_the_toy_problems_public_tests_run_in_the_handout(course: Path) -> None:
    proc = run(
        course, "-m", "pytest", "handout/test_relu.py", "--submission", "reference", "-q", "-p", "no:cacheprovider"
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "2 passed" in proc.stdout.splitlines()[-1], proc.stdout[-1000:]
