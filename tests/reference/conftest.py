"""Shared by the reference kernels' unit tests: where their cases run.

Each test module defines `run_cases(device) -> dict` and prints that dict as JSON when run as a
script. With a GPU the cases run in-process on CUDA; without one they run in a child process
with TRITON_INTERPRET=1, because Triton reads that flag once, when it is first imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def results(request: pytest.FixtureRequest) -> dict:
    module = request.module
    if torch.cuda.is_available():
        return module.run_cases("cuda")
    # the child imports the grader's float64 definitions from this checkout, wherever it runs from
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=path)
    proc = subprocess.run([sys.executable, module.__file__], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
