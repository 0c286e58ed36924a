"""FlashAttention's GPU memory estimate (`grader.engine.problems.memory_estimate` with the kind's hint) against
what each kind of backward holds, counted by hand: the reference (O, L, Delta and the gradients),
the example that overwrites S with P and dP with dS, a plain PyTorch backward as a CS336 student
first writes it, and one that reads a value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.engine.assignment.load import load_assignment
from grader.engine.loading import load_function
from grader.engine.problems.flash_attention.kind import AttentionCase, FlashAttention, score_matrices
from grader.engine.problems.memory_estimate import GIB, Estimate, estimate

ROOT = Path(__file__).resolve().parents[4]
BENCHMARKS = load_assignment(hidden=False).problem("flash_attention").benchmarks

#: the backward a CS336 student writes first (S, P, dP and dS materialised in float32, for every
#: head at once), as the honest corpus has it
PLAIN_BACKWARD = ROOT / "tests" / "honest" / "submissions" / "fa-einops-heads"


def estimate_peak_bytes(fn: Callable[..., Any], case: AttentionCase, submission: Path | None = None) -> Estimate:
    """The estimated peak of one forward + backward of `fn` at benchmark `case` (meta tensors)."""
    return estimate(FlashAttention(), fn, case, submission)


READS_A_VALUE = """

class Checked(FlashAttention2):
    @staticmethod
    def backward(ctx, grad_out):
        if ctx.saved_tensors[4].isnan().any().item():  # a debugging check left in
            raise ValueError("nan in L")
        return FlashAttention2.backward(ctx, grad_out)


def flash_attention(q, k, v, is_causal=False):
    return Checked.apply(q, k, v, is_causal)
"""


def cs336(h: int) -> AttentionCase:
    """The CS336 shape (N = 16384, D = 64, causal, bf16) with `h` heads, under a 48 GiB budget."""
    fields = {"b": 1, "h": h, "nq": 16384, "nk": 16384, "d": 64, "dtype": "bfloat16", "causal": True}
    return AttentionCase.model_validate({"name": f"h{h}", "suite": "gpu", "gpu_memory_gib": 48, **fields})


def submission(tmp_path: Path, extra: str) -> tuple[Any, Path]:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "flash_attention.py").write_text((ROOT / "reference" / "flash_attention.py").read_text() + extra)
    return load_function(folder, "flash_attention", "flash_attention"), folder


def kept_by_flash_attention(case: AttentionCase) -> int:
    """O, dq, dk, dv in the input dtype and L, Delta in float32: all a FlashAttention-2 call allocates."""
    return 4 * case.b * case.h * case.nq * case.d * 2 + 2 * case.b * case.h * case.nq * 4


def score_matrix(case: AttentionCase) -> int:
    return case.b * case.h * case.nq * case.nk * 4


@pytest.mark.parametrize("case", [*BENCHMARKS, cs336(16), cs336(8)], ids=lambda c: c.name)
def test_the_reference_allocates_its_outputs_and_nothing_else(case: AttentionCase) -> None:
    fn = load_function(ROOT / "reference", "flash_attention", "flash_attention")
    result = estimate_peak_bytes(fn, case, ROOT / "reference")
    assert result.peak_bytes == kept_by_flash_attention(case), result.largest()
    assert result.fits and result.note == ""


@pytest.mark.parametrize("case", [*BENCHMARKS, cs336(16)], ids=lambda c: c.name)
def test_overwriting_in_place_holds_two_score_matrices(case: AttentionCase) -> None:
    folder = ROOT / "examples" / "submissions" / "correct"
    result = estimate_peak_bytes(load_function(folder, "flash_attention", "flash_attention"), case, folder)
    assert result.peak_bytes is not None
    assert len(score_matrices(case, result.at_peak)) == 2
    assert 2 * score_matrix(case) < result.peak_bytes < 2 * score_matrix(case) + 2 * GIB


def test_a_plain_backward_holds_s_p_dp_and_ds_and_is_told_so() -> None:
    fn = load_function(PLAIN_BACKWARD, "flash_attention", "flash_attention")
    case = cs336(16)
    result = estimate_peak_bytes(fn, case, PLAIN_BACKWARD)
    assert result.peak_bytes is not None and score_matrix(case) == 16 * GIB
    assert len(score_matrices(case, result.at_peak)) >= 4
    assert 4 * 16 * GIB < result.peak_bytes < 6 * 16 * GIB
    assert result.fits is False
    assert "score matrices (S, P, dP, dS)" in result.hint and "memory budget" in result.hint


def test_a_backward_that_reads_a_value_is_reported_with_its_line(tmp_path: Path) -> None:
    fn, folder = submission(tmp_path, READS_A_VALUE)
    result = estimate_peak_bytes(fn, BENCHMARKS[0], folder)
    source = (folder / "flash_attention.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if ".item()" in text)
    assert result.peak_bytes is None and result.fits is None and not result.not_implemented
    assert result.note.startswith("could not be estimated: it reads a tensor's value (.item()")
    assert f"flash_attention.py, line {line}: if ctx.saved_tensors[4].isnan().any().item()" in result.note
    assert result.summary() == f"{BENCHMARKS[0].name}: {result.note}"


def test_a_plain_backward_fits_every_benchmark_budget_of_the_spec() -> None:
    """The budgets are chosen so that the backward the write-up allows fits: S, P, dP and dS in
    float32 at once, at every benchmark shape (the long one has 8 heads for it)."""
    fn = load_function(PLAIN_BACKWARD, "flash_attention", "flash_attention")
    for case in BENCHMARKS:
        result = estimate_peak_bytes(fn, case, PLAIN_BACKWARD)
        assert result.fits, result.summary()
