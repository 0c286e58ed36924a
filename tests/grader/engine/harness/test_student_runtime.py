"""The process settings a submission gets (grader/engine/harness/student_runtime.py), in the worker and the handout.

A compiled function sees one version per distinct shape, dtype and flag; the grader's GPU suite
gives an attention backward more of them than dynamo's default allows (seen on the H200:
`FailOnRecompileLimitHit` in the ninth case). Each check runs in a fresh process, as it would be
graded, with the real dynamo (the "eager" backend: no code generation, so it is quick on CPU).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.engine.harness import student_runtime
from tests.grader.worker_support import printed_at_import

ROOT = Path(__file__).resolve().parents[4]

MANY_VERSIONS = """
import torch
{prepare}
@torch.compile(fullgraph=True, dynamic=False, backend="eager")
def scaled(x, causal: bool):
    return x * 2 if causal else x - 1
for n in range(1, 7):                       # 6 shapes x 2 flags = 12 versions of one function
    for causal in (False, True):
        scaled(torch.ones(n, 3), causal)
print("compiled 12 versions")
"""


def _run(prepare: bool) -> subprocess.CompletedProcess[str]:
    line = "from grader.engine.harness import student_runtime; student_runtime.prepare()" if prepare else ""
    code = textwrap.dedent(MANY_VERSIONS.format(prepare=line))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_a_compiled_function_may_see_many_shapes() -> None:
    done = _run(prepare=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "compiled 12 versions" in done.stdout


def test_without_it_dynamo_gives_up_after_its_default() -> None:
    """The failure the settings exist for (if torch's default grows past 12, this skips)."""
    done = _run(prepare=False)
    if done.returncode == 0:
        pytest.skip("this torch recompiles 12 versions by default")
    assert "RecompileLimit" in done.stderr


PROBE = """
import json, torch._dynamo.config as dynamo
seen = {"recompile_limit": dynamo.recompile_limit, "accumulated": dynamo.accumulated_recompile_limit}
print(json.dumps(seen), flush=True)

def triton_gelu(x):
    return x
"""


def test_the_worker_applies_them_before_the_submission_is_imported(tmp_path: Path) -> None:
    assert printed_at_import(tmp_path, PROBE) == {
        "recompile_limit": student_runtime.RECOMPILE_LIMIT,
        "accumulated": student_runtime.ACCUMULATED_RECOMPILE_LIMIT,
    }


def test_the_handout_applies_the_same_ones() -> None:
    code = (
        "import grader.engine.handout.support, torch._dynamo.config as d; print(d.recompile_limit, "
        "d.accumulated_recompile_limit)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.split() == [
        str(student_runtime.RECOMPILE_LIMIT),
        str(student_runtime.ACCUMULATED_RECOMPILE_LIMIT),
    ], done.stderr[-2000:]


def test_the_write_up_states_the_limit() -> None:
    text = (ROOT / "assignment" / "README.md").read_text()
    assert f"up to {student_runtime.RECOMPILE_LIMIT} versions" in text
