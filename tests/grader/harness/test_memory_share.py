"""The worker's share of the GPU's memory and its lift when a benchmark shape does not fit it.

The share is the grader's rule: a shape that fits the card but not the 75% share is timed again
with the GPU held alone and the share lifted; only an out-of-memory error then is the student's.
The GPU tests grade a GeLU that takes a given part of the card at its benchmark shapes (as a
FlashAttention's PyTorch backward holds its 16 GiB score matrices); the CPU tests check what
needs no GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from grader import protocol
from grader.cli import main
from grader.harness import memory_share

ROOT = Path(__file__).resolve().parents[3]
CORRECT_GELU = (ROOT / "examples" / "submissions" / "correct" / "gelu.py").read_text()
LIFT_NOTE = "ran out of GPU memory under the worker's share of the card"


def holding(part: float) -> str:
    """The correct GeLU, which at the benchmark shapes (over 2**26 elements; correctness cases are
    smaller) also allocates `part` of the card's memory in each call."""
    held = int(part * torch.cuda.get_device_properties(0).total_memory)
    return CORRECT_GELU.replace(
        "    xc = x.contiguous()",
        "    if x.numel() > 1 << 26:\n"
        f"        scratch = torch.empty({held}, dtype=torch.uint8, device=x.device)\n"
        "        del scratch\n"
        "    xc = x.contiguous()",
    )


def graded(folder: Path, out: Path) -> dict:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "gelu"]) == 0
    return json.loads((out / "result.json").read_text())["problems"][0]


def test_the_headroom_a_request_carries_is_never_negative() -> None:
    shape = {"case": {"name": "n4096"}, "seed": 0, "sets": 1, "budget_s": 0.1}
    assert protocol.TimeRequest(**shape, share_headroom=1 << 30).share_headroom == 1 << 30
    assert protocol.TimeRequest(**shape).share_headroom is None
    with pytest.raises(ValidationError):
        protocol.TimeRequest(**shape, share_headroom=-1)


def test_without_a_gpu_the_message_still_says_the_share_is_the_graders() -> None:
    if torch.cuda.is_available():
        pytest.skip("on a GPU the message gives the share in GiB: the tests below")
    assert "only part of the GPU's memory" in memory_share.describe()
    memory_share.release_cached()  # CUDA never initialised: nothing to give back, no error


@pytest.mark.gpu
def test_a_shape_that_fits_the_card_but_not_the_share_is_timed_with_the_share_lifted(
    make_submission, tmp_path: Path
) -> None:
    gelu = graded(make_submission(gelu=holding(0.85)), tmp_path / "out")
    assert gelu["status"] == "passed", gelu
    perf = gelu["performance"]
    assert perf["status"] == "measured" and all(s["ratio"] is not None and not s["flags"] for s in perf["shapes"]), perf
    assert LIFT_NOTE in gelu["output"]
    assert not gelu.get("contended"), gelu  # the share, not other gradings


@pytest.mark.gpu
def test_a_shape_that_does_not_fit_the_card_fails_its_timing_and_says_what_was_free(
    make_submission, tmp_path: Path
) -> None:
    gelu = graded(make_submission(gelu=holding(1.05)), tmp_path / "out")
    assert gelu["status"] == "passed", gelu  # every correctness case passed
    perf = gelu["performance"]
    assert perf["status"] == "skipped" and perf["score"] == 0, perf
    assert perf["reason"].startswith("timing failed:") and "with the GPU held alone" in perf["reason"], perf
    assert LIFT_NOTE in gelu["output"]
