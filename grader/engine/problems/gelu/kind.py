"""GeLU (tanh approximation), elementwise over any shape and strides: what a case may say (any
shape up to 4-D, a dtype, a memory layout, special values), the float64 definition expected outputs
come from (matmul's fused epilogue too), its inputs and its work."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from pydantic import Field

from grader.engine.problems.base import TORCH_DTYPES, OneTensorKind, with_layout
from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class GeluCase(Case):
    shape: list[int] = Field(min_length=1, max_length=4)
    dtype: DType
    layout: Literal["contiguous", "transposed", "strided", "offset"] = "contiguous"
    values: Literal["normal", "large", "nan"] = "normal"

    def describe(self) -> str:
        return with_layout_note(f"`{self.shape}` {SHORT_DTYPE[self.dtype]}", self.layout)


def gelu_definition(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the precision of x."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class Gelu(OneTensorKind):
    name = "gelu"
    case_model = GeluCase
    definition = staticmethod(gelu_definition)
    torch_op = staticmethod(lambda x: torch.nn.functional.gelu(x, approximate="tanh"))
    value_std = 3.0

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        assert isinstance(case, GeluCase)
        x = torch.randn(*case.shape, generator=gen, device=gen.device) * 3.0
        if case.values == "large":
            # magnitudes where x^3 overflows fp16 and tanh saturates: kernels must compute in fp32
            x = x * 3000.0
        elif case.values == "nan":
            mask = torch.rand(*case.shape, generator=gen, device=gen.device) < 0.05
            x = x.masked_fill(mask, float("nan"))
        x = x.to(TORCH_DTYPES[case.dtype])
        return {"x": with_layout(x, case.layout, gen)}

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, GeluCase)
        n = math.prod(case.shape)
        size = TORCH_DTYPES[case.dtype].itemsize
        return 2.0 * n * size, 0.0
