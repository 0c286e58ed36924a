"""`pytest handout` says what `grader grade` says, for the entries whose table asks (`handout = true`).

The GPU's rules on a CPU (grader/engine/harness/gpu_compile.py), the interpreter's bounds and the saved
L's message are one code path (grader/engine/harness/calls.py) shared by the grader's worker and the
handout: each such entry fails its public cases locally with the grader's own message.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ENTRIES: list[dict[str, Any]] = [
    e for e in tomllib.loads((HERE / "corpus.toml").read_text())["attack"] if e.get("handout")
]


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["name"] for e in ENTRIES])
def test_the_handout_fails_with_the_graders_message(entry: dict[str, Any], tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        f"handout/test_{entry['problem']}.py",
        "--submission",
        str(HERE / "submissions" / entry["name"]),
        "-q",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, errors="replace")
    text = done.stdout + done.stderr
    assert done.returncode == 1, text[-3000:]  # tests failed; the run itself went on to its summary
    assert " failed" in text.splitlines()[-1], text[-3000:]
    for needle in entry["message"]:
        assert needle in text, f"{needle!r} not in the handout's output:\n{text[-3000:]}"
