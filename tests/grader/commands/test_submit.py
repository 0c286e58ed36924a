"""`grader submit` refuses a bad folder before any test or upload, and answers in the terminal."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from grader import ROOT, cli

# nothing listens here: a submit that got as far as the network would say so, not name the folder
SERVER = ["--server", "http://127.0.0.1:9", "--token", "t"]


def test_a_missing_folder_is_refused_before_the_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert cli.main(["submit", str(tmp_path / "typo"), *SERVER]) == 2
    err = capsys.readouterr().err
    assert f"no such folder: {tmp_path / 'typo'}" in err and "public tests" not in err
    assert time.monotonic() - started < 10  # no pytest handout ran (it takes 20 s or more)


def test_a_syntax_error_is_refused_with_its_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "sub"
    folder.mkdir()
    for stub in (ROOT / "student_template").glob("*.py"):
        (folder / stub.name).write_text(stub.read_text())
    (folder / "gelu.py").write_text("def triton_gelu(x)\n    return x\n")
    assert cli.main(["submit", str(folder), *SERVER]) == 2
    err = capsys.readouterr().err
    assert "gelu.py, line 1" in err and "public tests" not in err and "submitted as" not in err
