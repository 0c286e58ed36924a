"""The benchmark shapes' first calls, made beside other gradings before timing takes the GPU alone.

On a GPU only: on the CPU nothing is timed, so no first calls are made (their absence there is
checked too). grader/engine/harness/autotune_reset.py's own tests need no GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grader.cli import main
from grader.engine.assignment.load import load_assignment
from grader.engine.judge import performance

ROOT = Path(__file__).resolve().parents[4]
CORRECT_GELU = (ROOT / "examples" / "submissions" / "correct" / "gelu.py").read_text()

# the correct example's kernel, autotuned: the tuning at the benchmark shapes happens twice (beside
# others in the first calls, then alone in the first timed call)
AUTOTUNED_GELU = CORRECT_GELU.replace(
    "@triton.jit",
    '@triton.autotune([triton.Config({"BLOCK": 512}), triton.Config({"BLOCK": 1024})], key=["n"])\n@triton.jit',
).replace(
    "_gelu[(triton.cdiv(n, 1024),)](xc, y, n, BLOCK=1024)",
    '_gelu[lambda m: (triton.cdiv(n, m["BLOCK"]),)](xc, y, n)',
)

# right on every correctness shape, broken at the benchmark shapes only (a grid too large, say)
FAILS_WHEN_LARGE = CORRECT_GELU.replace(
    "    xc = x.contiguous()",
    "    if x.numel() > 1 << 26:\n"
    '        raise ValueError("this launch grid does not fit a large input")\n'
    "    xc = x.contiguous()",
)


# the first calls: one per input set at each benchmark shape (gelu's shapes all pass 2**26 elements)
FIRST_CALLS = performance.INPUT_SETS * len(load_assignment(hidden=False).problem("gelu").benchmarks)

# behaves in the first calls, never returns once timed
HANGS_WHEN_TIMED = CORRECT_GELU.replace(
    "    xc = x.contiguous()",
    "    if x.numel() > 1 << 26:\n"
    "        _large.append(1)\n"
    f"        while len(_large) > {FIRST_CALLS}:\n"
    "            pass\n"
    "    xc = x.contiguous()",
).replace("def triton_gelu(", "_large = []\n\n\ndef triton_gelu(")


def graded(folder: Path, out: Path, *extra: str) -> dict:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "gelu", *extra]) == 0
    return json.loads((out / "result.json").read_text())["problems"][0]


def test_on_the_cpu_no_first_calls_are_made(make_submission, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("on a GPU they are made: the tests below")
    gelu = graded(make_submission(gelu=CORRECT_GELU), tmp_path / "out")
    assert gelu["status"] == "passed" and gelu["phases"]["warm_s"] == 0.0


@pytest.mark.gpu
def test_an_autotuned_kernel_is_warmed_beside_others_and_timed(make_submission, tmp_path: Path) -> None:
    assert "triton.autotune" in AUTOTUNED_GELU and 'm["BLOCK"]' in AUTOTUNED_GELU
    gelu = graded(make_submission(gelu=AUTOTUNED_GELU), tmp_path / "out")
    assert gelu["status"] == "passed" and gelu["phases"]["warm_s"] > 0
    perf = gelu["performance"]
    assert perf["status"] == "measured" and not any(s["flags"] for s in perf["shapes"]), perf


@pytest.mark.gpu
def test_a_kernel_that_fails_only_at_the_benchmark_shapes_fails_its_timing(make_submission, tmp_path: Path) -> None:
    """The first call raises beside other gradings; the timing makes it again alone and says so."""
    gelu = graded(make_submission(gelu=FAILS_WHEN_LARGE), tmp_path / "out")
    assert gelu["status"] == "passed", gelu  # every correctness case passed
    perf = gelu["performance"]
    assert perf["status"] == "skipped" and perf["score"] == 0
    assert perf["reason"].startswith("timing failed:") and "does not fit a large input" in perf["reason"]
    assert gelu["phases"]["timing_s"] < 5.0  # a failing call, not a timed window


@pytest.mark.gpu
def test_a_call_that_never_returns_when_timed_holds_the_gpu_alone_only_so_long(
    make_submission, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grader.engine.judge import windows

    monkeypatch.setattr(windows, "REQUEST_LIMIT_S", 5.0)
    gelu = graded(make_submission(gelu=HANGS_WHEN_TIMED), tmp_path / "out")
    assert gelu["status"] == "passed" and gelu["phases"]["warm_s"] > 0, gelu
    perf = gelu["performance"]
    assert perf["status"] == "skipped" and "a timed window ran past 5 s with the GPU held alone" in perf["reason"]
    assert 5.0 <= gelu["phases"]["timing_s"] < 30.0  # not the problem's limit
