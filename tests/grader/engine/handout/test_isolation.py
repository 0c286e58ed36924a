"""`pytest handout` survives a crashing kernel (issue 53): each problem's cases run in a process of
their own (grader/engine/handout/isolation.py, child.py), as `grader grade` runs each problem in a worker.

A GeLU that segfaults once ended the whole run with exit code 139: no summary, softmax and matmul
never tested. These run the real handout in a real pytest process on submissions that crash, and
a CaseRunner on one that hangs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.engine.assignment.load import load_assignment
from grader.engine.handout.isolation import PRELOAD, submission_frames
from grader.engine.handout.support import CaseRunner

ROOT = Path(__file__).resolve().parents[4]
CORRECT = ROOT / "examples" / "submissions" / "correct"

SEGFAULT_IN_CALL = """import ctypes

import torch


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    ctypes.string_at(0)  # reads address 0
    return y
"""
SEGFAULT_AT_IMPORT = """import os
import signal

os.kill(os.getpid(), signal.SIGSEGV)


def triton_gelu(x):
    return x
"""
#: the correct softmax, noting the process it was imported in (to see that none outlives the run)
NOTED_SOFTMAX = "import os as _os\n\nopen({pids!r}, 'a').write(f'{{_os.getpid()}}\\n')\n"
# hangs on the first CPU case (2-D), computes GeLU right on the others
HANG_ON_2D = """from correct_gelu import triton_gelu as _gelu


def triton_gelu(x):
    while x.dim() == 2:
        pass
    return _gelu(x)
"""


def _line(source: str, code: str) -> int:
    return next(n for n, text in enumerate(source.splitlines(), 1) if text.strip().startswith(code))


def _folder(tmp_path: Path, gelu: str) -> Path:
    """The correct example with `gelu` as its gelu.py."""
    folder = tmp_path / "sub"
    shutil.copytree(CORRECT, folder)
    (folder / "gelu.py").write_text(gelu)
    return folder


def _handout(folder: Path, *args: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "pytest", "handout", "--submission", str(folder), "-q", "-rA"]
    argv += ["-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore::DeprecationWarning", *args]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, errors="replace")
    return done.returncode, done.stdout + done.stderr


def _outcomes(text: str, outcome: str) -> list[str]:
    """The test ids pytest's -rA summary lists as `outcome` (PASSED, FAILED)."""
    return [line.split()[1] for line in text.splitlines() if line.startswith(f"{outcome} handout/")]


def _gone(pid: int) -> bool:
    """No such process (or only a zombie, waiting for a parent that left to be reaped)."""
    try:
        return " Z " in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:3]
    except (FileNotFoundError, ProcessLookupError):
        return True


def test_a_segfault_in_a_call_fails_that_problems_tests_and_the_run_goes_on(tmp_path: Path) -> None:
    folder = _folder(tmp_path, SEGFAULT_IN_CALL)
    pids = tmp_path / "pids"
    softmax = folder / "softmax.py"
    softmax.write_text(NOTED_SOFTMAX.format(pids=str(pids)) + softmax.read_text())
    code, text = _handout(folder, "-k", "gelu or softmax")
    assert code == 1, text[-3000:]  # tests failed; the run itself went on to its summary
    assert re.search(r"\d+ failed, \d+ passed", text.splitlines()[-1]), text[-3000:]
    failed, passed = _outcomes(text, "FAILED"), _outcomes(text, "PASSED")
    assert failed and all(t.startswith("handout/test_gelu.py::") for t in failed), failed
    assert any(t.startswith("handout/test_softmax.py::test_matches_definition") for t in passed), passed
    assert text.count("the process running gelu was killed by SIGSEGV") >= len(failed), text[-3000:]
    line = _line(SEGFAULT_IN_CALL, "ctypes.string_at(0)")
    assert f"gelu.py:{line} in triton_gelu: ctypes.string_at(0)" in text, text[-3000:]
    assert "call 1 of 2:" in text and "Fatal Python error" not in text  # faulthandler's dump is read, not shown
    noted = [int(pid) for pid in pids.read_text().split()]
    assert noted and all(_gone(pid) for pid in noted), "a problem's process outlived the run"


def test_the_honest_twin_passes_everything(tmp_path: Path) -> None:
    code, text = _handout(_folder(tmp_path, (CORRECT / "gelu.py").read_text()), "-k", "gelu or softmax")
    assert code == 0, text[-3000:]
    assert "failed" not in text.splitlines()[-1] and _outcomes(text, "PASSED"), text[-3000:]


def test_a_segfault_at_import_fails_that_problems_tests_the_same_way(tmp_path: Path) -> None:
    code, text = _handout(_folder(tmp_path, SEGFAULT_AT_IMPORT), "-k", "gelu or softmax")
    assert code == 1, text[-3000:]
    failed, passed = _outcomes(text, "FAILED"), _outcomes(text, "PASSED")
    assert failed and all(t.startswith("handout/test_gelu.py::") for t in failed), failed
    assert any(t.startswith("handout/test_softmax.py::") for t in passed), passed
    line = _line(SEGFAULT_AT_IMPORT, "os.kill(")
    assert "importing gelu.py:" in text and "killed by SIGSEGV" in text, text[-3000:]
    assert f"gelu.py:{line} in <module>: os.kill(os.getpid(), signal.SIGSEGV)" in text, text[-3000:]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU cases, through Triton's interpreter")
def test_a_hang_is_stopped_at_the_limit_and_the_next_case_gets_a_fresh_process(tmp_path: Path) -> None:
    """The limit is the problem's time limit in the spec (180 s for GeLU); a CaseRunner can be given
    a shorter one, as here."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "correct_gelu.py").write_text((CORRECT / "gelu.py").read_text())
    (folder / "gelu.py").write_text(HANG_ON_2D)
    square, ragged = load_assignment(hidden=False).problem("gelu").suite_cases("cpu", "public")[:2]
    assert len(square.shape) == 2 and len(ragged.shape) != 2  # type: ignore[attr-defined]
    runner = CaseRunner(folder, "cpu", time_limit_s=8)
    try:
        with pytest.raises(pytest.fail.Exception) as stopped:
            runner.check("gelu", square)
        message = str(stopped.value)
        assert "no answer within 8 s (gelu's time limit in the grader)" in message, message
        assert re.search(r"gelu\.py:\d+ in triton_gelu: (while x\.dim\(\) == 2:|pass)", message), message
        assert "gelu" not in runner.processes, "the stopped process is not asked again"
        runner.check("gelu", ragged)  # a fresh process
        pid = runner.processes["gelu"].process.pid
    finally:
        runner.close()
    assert pid is not None and _gone(pid)


def test_the_submissions_frames_are_read_from_faulthandlers_dump(tmp_path: Path) -> None:
    (tmp_path / "gelu.py").write_text("a = 1\nb = 2\ndef triton_gelu(x):\n    return x\n")
    dump = (
        "Fatal Python error: Segmentation fault\n\n"
        "Thread 0x00007e (most recent call first):\n"
        f'  File "{tmp_path}/gelu.py", line 1 in <module>\n\n'
        "Current thread 0x00007f (most recent call first):\n"
        f'  File "{tmp_path}/gelu.py", line 4 in triton_gelu\n'
        '  File "/elsewhere/calls.py", line 210 in call\n'
        f'  File "{tmp_path}/gelu.py", line 2 in <module>\n'
        "\nExtension modules: numpy.core._multiarray_umath (total: 1)\n"
    )
    frames = submission_frames(dump, tmp_path)  # the current thread's, innermost last
    assert [(Path(f.filename).name, f.lineno, f.name, f.line) for f in frames] == [
        ("gelu.py", 2, "<module>", "b = 2"),
        ("gelu.py", 4, "triton_gelu", "return x"),
    ]
    # a signal that came to a thread of none of the submission's frames: the other threads'
    elsewhere = dump.replace("Current thread", "Thread").replace("Thread 0x00007e", "Current thread 0x00007e")
    elsewhere = elsewhere.replace(f'  File "{tmp_path}/gelu.py", line 1 in <module>\n', '  File "/x.py", line 1 in f\n')
    assert [f.lineno for f in submission_frames(elsewhere, tmp_path)] == [2, 4]


#: counts the CUDA initialisations (torch's, and cuInit through cudaGetDeviceCount) while PRELOAD imports
NO_CUDA_AT_PRELOAD = """
import importlib, sys, torch
calls = []
for name in ("_cuda_getDeviceCount", "_cuda_init"):
    original = getattr(torch._C, name)
    setattr(torch._C, name, lambda *a, _o=original, _n=name: calls.append(_n) or _o(*a))
for module in sys.argv[1:]:
    importlib.import_module(module)
print(calls)
"""


def test_the_forkserver_preload_never_starts_cuda() -> None:
    """Children are forked from the forkserver: one forked after cuInit could not use the GPU. As on
    a GPU machine, without TRITON_INTERPRET (the interpreter's driver check asks torch for devices,
    on a CPU, where the handout sets it and no child uses CUDA)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", NO_CUDA_AT_PRELOAD, *PRELOAD],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]
