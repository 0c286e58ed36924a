"""Softmax over the last dimension of a 2-D tensor, rows possibly far longer than one block: what a
case may say (an (M, N) shape, a dtype, a row layout, special values), the float64 definition
expected outputs come from, its inputs (special values, padded rows) and its work."""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from grader.engine.problems.base import TORCH_DTYPES, OneTensorKind, with_layout
from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class SoftmaxCase(Case):
    shape: list[int] = Field(min_length=2, max_length=2)
    dtype: DType
    layout: Literal["contiguous", "padded_rows", "offset"] = "contiguous"
    values: Literal["normal", "large", "neg_inf", "constant", "all_neg_inf"] = "normal"

    def describe(self) -> str:
        return with_layout_note(f"`{self.shape}` {SHORT_DTYPE[self.dtype]}", self.layout)


def softmax_definition(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def padded_rows(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A view whose rows are further apart in memory than their length (row stride > N)."""
    m, n = x.shape
    big = torch.randn(m, n + 13, generator=gen, device=gen.device).to(x.dtype)
    view = big[:, 5 : 5 + n]
    view.copy_(x)
    return view


class Softmax(OneTensorKind):
    name = "softmax"
    case_model = SoftmaxCase
    definition = staticmethod(softmax_definition)
    torch_op = staticmethod(lambda x: torch.softmax(x, dim=-1))
    value_std = 2.0

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        assert isinstance(case, SoftmaxCase)
        m, n = case.shape
        x = torch.randn(m, n, generator=gen, device=gen.device) * 2.0
        if case.values == "large":
            # around +-1e4: exp overflows unless the row max is subtracted first
            x = x * 5.0 + torch.where(torch.rand(m, 1, generator=gen, device=gen.device) < 0.5, -1e4, 1e4)
        elif case.values == "neg_inf":
            x = x.masked_fill(torch.rand(m, n, generator=gen, device=gen.device) < 0.3, float("-inf"))
            x[:, 0] = torch.randn(m, generator=gen, device=gen.device)  # keep at least one finite value per row
        elif case.values == "constant":
            x = torch.randn(m, 1, generator=gen, device=gen.device).expand(m, n).clone()
        elif case.values == "all_neg_inf":
            rows = torch.rand(m, generator=gen, device=gen.device) < 0.25
            rows[0] = True
            x[rows] = float("-inf")
        x = x.to(TORCH_DTYPES[case.dtype])
        if case.layout == "padded_rows":
            x = padded_rows(x, gen)
        else:
            x = with_layout(x, case.layout, gen)
        return {"x": x}

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, SoftmaxCase)
        m, n = case.shape
        return 2.0 * m * n * TORCH_DTYPES[case.dtype].itemsize, 0.0
