"""`grader pack`: the public tests run first, and the archive is one `grader batch` accepts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader import cli
from grader.course.batch import archives
from grader.course.batch.discovery import discover
from grader.course.batch.tasks import prepare
from grader.engine.assignment.load import load_assignment
from grader.engine.records.files import submission_hash

ROOT = Path(__file__).resolve().parents[3]
CORRECT = ROOT / "examples" / "submissions" / "correct"


def test_pack_runs_the_public_tests_and_the_batch_accepts_the_archive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "mine"
    shutil.copytree(CORRECT, folder)
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "gelu.cpython-311.pyc").write_bytes(b"junk")
    (folder / "notes.txt").write_text("not packed")
    out = tmp_path / "me.tar.gz"
    assert cli.main(["pack", str(folder), "--out", str(out), "--problems", "gelu"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "public tests passed" in err and "me.tar.gz" in err
    # what the batch does to an archive: the same files, the same content hash as the folder
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(out, subs / "me.tar.gz")
    modules = [p.module for p in load_assignment(hidden=False).problems]
    task = prepare(discover(subs)[0], tmp_path / "grades", modules)
    assert task.error == "" and task.folder is not None
    assert sorted(p.name for p in task.folder.iterdir()) == sorted(f"{m}.py" for m in modules)
    (folder / "notes.txt").unlink()
    shutil.rmtree(folder / "__pycache__")
    assert task.sha == submission_hash(folder)


def test_failing_tests_are_reported_and_the_archive_still_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "stub.tar.gz"
    assert cli.main(["pack", str(ROOT / "student_template"), "--out", str(out), "--problems", "gelu"]) == 0
    assert "did not all pass" in " ".join(capsys.readouterr().err.split())
    assert archives.find_submission_root(archives.unpack(out, tmp_path / "u"), ["gelu"]).is_dir()


def test_a_folder_without_the_stubs_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "half"
    folder.mkdir()
    (folder / "gelu.py").write_text("x = 1\n")
    assert cli.main(["pack", str(folder), "--out", str(tmp_path / "h.tar.gz"), "--no-tests"]) == 2
    assert "lacks softmax.py" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "h.tar.gz").exists()
