"""`pytest handout` as a student runs it: stubs fail with NotImplementedError, the reference passes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_handout(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "handout", "-q", "-p", "no:randomly", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )


def test_stubs_fail_with_not_implemented() -> None:
    proc = run_handout()
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert " passed" not in proc.stdout.splitlines()[-1]
    for problem in ("gelu", "softmax", "matmul", "flash_attention"):
        assert f"test_{problem}.py" in proc.stdout
    assert proc.stdout.count("NotImplementedError") >= 4


def test_reference_passes() -> None:
    proc = run_handout("--submission", "reference")
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert "failed" not in proc.stdout.splitlines()[-1]


def test_bf16_on_cpu_for_dot_problems_explains_the_interpreter_limit() -> None:
    proc = run_handout("--submission", "reference", "-k", "matmul", "--dtype", "bfloat16", "-rs")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "interpreter computes tl.dot on bfloat16" in proc.stdout.replace("\n", " ") or "cuda" in proc.stdout.lower()
