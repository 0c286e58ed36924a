"""The checks before `grader submit` tests or uploads anything: the folder, the modules, the syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.course.pack import PackError
from grader.course.precheck import check_submission

MODULES = ["gelu", "softmax"]


def _folder(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir()
    for name, text in {"gelu": "x = 1\n", "softmax": "y = 2\n", **files}.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def test_a_folder_that_parses_passes(tmp_path: Path) -> None:
    check_submission(_folder(tmp_path, helpers="def f():\n    return 1\n"), MODULES)


def test_a_missing_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(PackError, match=f"no such folder: {tmp_path / 'typo'}"):
        check_submission(tmp_path / "typo", MODULES)


def test_a_missing_module_is_named(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "softmax.py").unlink()
    with pytest.raises(PackError, match="lacks softmax.py"):
        check_submission(folder, MODULES)


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path, softmax="import torch\n\ndef f(:\n    pass\n", helpers="  x = 1\n")
    with pytest.raises(PackError) as raised:
        check_submission(folder, MODULES)
    message = str(raised.value)
    assert "softmax.py, line 3: " in message and "helpers.py, line 1: unexpected indent" in message
    assert "gelu.py" not in message


def test_submit_says_a_folder_is_missing_before_loading_pytorch(tmp_path: Path) -> None:
    """The precheck reads the spec's module names without validating it (validation imports every
    problem's kind, and PyTorch with it: seconds before a typo could be said)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    code = (
        "import sys\nfrom grader.cli import main\n"
        f"code = main(['submit', {str(tmp_path / 'student_templat')!r}, '--server', 'http://127.0.0.1:9', "
        "'--token', 'x'])\nprint('TORCH-LOADED' if 'torch' in sys.modules else 'NO-TORCH', code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert "no such folder" in done.stderr and "NO-TORCH 2" in done.stdout, done.stdout + done.stderr
