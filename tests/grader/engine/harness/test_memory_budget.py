"""A benchmark shape's GPU memory budget: the same cap on every card, its peak recorded.

The GPU tests grade a GeLU that also allocates a given scratch at its benchmark shapes (16384 x
16384: a 1 GiB float32 output; the budget is 4 GiB): inside the budget it is timed and its peak
recorded; past it the timing fails with the budget named; a budget no card here can give leaves
the problem ungradable, an error row with its points pending, never a zero. The CPU tests check
the spec's rule and the protocol's fields.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from grader.cli import main
from grader.engine import protocol
from grader.engine.assignment.load import load_assignment
from grader.engine.harness import memory_share
from grader.engine.spec.model import SpecError
from tests.spec_support import spec_with_budget

ROOT = Path(__file__).resolve().parents[4]
CORRECT_GELU = (ROOT / "examples" / "submissions" / "correct" / "gelu.py").read_text()


def holding(gib: float) -> str:
    """The correct GeLU, which at the benchmark shapes (over 2**26 elements; correctness cases are
    smaller) also holds `gib` GiB of scratch while it runs."""
    return CORRECT_GELU.replace(
        "    xc = x.contiguous()",
        "    if x.numel() > 1 << 26:\n"
        f"        scratch = torch.empty({int(gib * (1 << 30))}, dtype=torch.uint8, device=x.device)\n"
        "        del scratch\n"
        "    xc = x.contiguous()",
    )


def graded(folder: Path, out: Path, *extra: str) -> dict:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "gelu", *extra]) == 0
    return json.loads((out / "result.json").read_text())


def test_every_benchmark_states_a_budget_and_no_case_has_one(tmp_path: Path) -> None:
    spec = spec_with_budget(tmp_path / "spec", "16384x16384-fp32", 4)
    text = spec.read_text()
    spec.write_text(text.replace('name = "16384x16384-fp32"\ngpu_memory_gib = 4\n', 'name = "16384x16384-fp32"\n'))
    with pytest.raises(SpecError, match="16384x16384-fp32.*needs gpu_memory_gib"):
        load_assignment(spec)
    spec.write_text(text.replace('name = "square-fp32"\n', 'name = "square-fp32"\ngpu_memory_gib = 1\n', 1))
    with pytest.raises(SpecError, match="square-fp32.*only benchmark shapes have a memory budget"):
        load_assignment(spec)
    budgets = {b.name: b.gpu_memory_gib for p in load_assignment().problems for b in p.benchmarks}
    assert budgets and all(gib and gib > 0 for gib in budgets.values()), budgets


def test_the_budget_a_request_carries_is_positive_and_an_unavailable_reply_says_why() -> None:
    shape = {"case": {"name": "n4096"}, "seed": 0, "sets": 1, "budget_s": 0.1}
    assert protocol.TimeRequest(**shape, budget_bytes=1 << 30).budget_bytes == 1 << 30
    with pytest.raises(ValidationError):
        protocol.TimeRequest(**shape, budget_bytes=0)
    assert protocol.WarmRequest.replies["unavailable"] is protocol.Unavailable
    assert protocol.Unavailable(message="too small", never=True).status == "unavailable"


def test_without_a_gpu_the_message_still_says_the_share_is_the_graders() -> None:
    if torch.cuda.is_available():
        pytest.skip("on a GPU the message gives the share in GiB")
    assert "only part of the GPU's memory" in memory_share.describe()


@pytest.mark.gpu
def test_a_shape_within_its_budget_is_timed_and_its_peak_recorded(make_submission, tmp_path: Path) -> None:
    gelu = graded(make_submission(gelu=holding(2.0)), tmp_path / "out")["problems"][0]
    perf = gelu["performance"]
    assert perf["status"] == "measured", perf
    for shape in perf["shapes"]:
        assert shape["budget_gib"] == 4, shape
        # the 2 GiB scratch and the output (1 GiB in float32, 0.5 in bfloat16) at once, at most
        assert 2.0 <= shape["peak_gib"] <= 3.1, shape


@pytest.mark.gpu
def test_a_shape_past_its_budget_fails_its_timing_on_any_card_with_the_budget_named(
    make_submission, tmp_path: Path
) -> None:
    result = graded(make_submission(gelu=holding(5.0)), tmp_path / "out")
    gelu = result["problems"][0]
    assert gelu["status"] == "passed" and result["status"] == "graded", gelu  # every correctness case passed
    perf = gelu["performance"]
    assert perf["status"] == "skipped" and perf["score"] == 0, perf
    assert "may allocate 4 GiB beyond its inputs" in perf["reason"], perf


@pytest.mark.gpu
def test_a_budget_the_card_cannot_give_is_ungradable_here_never_a_zero(make_submission, tmp_path: Path) -> None:
    spec = spec_with_budget(tmp_path / "spec", "16384x16384-fp32", 1000)
    result = graded(make_submission(gelu=CORRECT_GELU), tmp_path / "out", "--spec", str(spec))
    gelu = result["problems"][0]
    assert result["status"] == "error" and result["error_kind"] == "infrastructure", result["error"]
    assert gelu["performance"]["status"] == "not_measured" and gelu["performance"]["score"] is None, gelu
    assert "its budget of 1000 GiB" in gelu["ungradable"] and "this GPU has" in gelu["ungradable"], gelu
    assert gelu["score"] == 10  # its correctness stands; its performance points are pending
