"""The refill kernel of verified timing (grader/problems/fill.py), run by Triton's interpreter on CPU."""

from __future__ import annotations

import pytest
import torch

from grader.problems import fill


def drawn(n: int, seed: int, std: float = 1.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    t = torch.full((n,), float("nan"), dtype=dtype)
    fill.draw(t, seed, std)
    return t


def test_values_are_normal_with_the_asked_spread() -> None:
    t = drawn(3 * 4 * fill.BLOCK + 5, seed=11, std=0.5)
    assert not t.isnan().any()  # the last, partial block is written too
    assert abs(t.mean().item()) < 0.02
    assert t.std().item() == pytest.approx(0.5, rel=0.03)
    assert (t.abs() > 1.5).float().mean().item() == pytest.approx(0.0027, abs=0.002)  # 3-sigma tail


def test_the_seed_decides_the_values() -> None:
    n = 2 * 4 * fill.BLOCK
    assert torch.equal(drawn(n, seed=5), drawn(n, seed=5))
    assert (drawn(n, seed=5) != drawn(n, seed=6)).float().mean().item() > 0.99


def test_no_value_lands_past_the_end() -> None:
    buffer = torch.zeros(4 * fill.BLOCK + 64)
    fill.draw(buffer[:4 * fill.BLOCK + 3], seed=2, std=1.0)
    assert torch.count_nonzero(buffer[4 * fill.BLOCK + 3:]) == 0


def test_low_precision_is_the_draw_rounded() -> None:
    t = drawn(4 * fill.BLOCK, seed=9, dtype=torch.bfloat16)
    # within one bf16 step: the interpreter truncates where the GPU rounds to nearest
    torch.testing.assert_close(t.float(), drawn(4 * fill.BLOCK, seed=9), rtol=2**-7, atol=0.0)


def test_cpu_tensors_and_strided_views_keep_pytorchs_draw() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.zeros(8, 6)
    fill.normal_([x.t()], gen, 2.0)
    expected = torch.zeros(8, 6).t().normal_(0.0, 2.0, generator=torch.Generator().manual_seed(3))
    assert torch.equal(x.t(), expected)
