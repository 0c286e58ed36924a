"""GeLU (tanh approximation), elementwise over any shape and strides."""

from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any, Callable, Literal

import torch
from pydantic import Field

from grader.problems.base import TORCH_DTYPES, CallOutput, ProblemKind, Watch, with_layout
from grader.spec import Case, DType


class GeluCase(Case):
    shape: list[int] = Field(min_length=1, max_length=4)
    dtype: DType
    layout: Literal["contiguous", "transposed", "strided", "offset"] = "contiguous"
    values: Literal["normal", "large", "nan"] = "normal"


def gelu_definition(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the precision of x."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


class Gelu(ProblemKind):
    name = "gelu"
    case_model = GeluCase
    output_names = ("out",)

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

    def expected(self, inputs: dict[str, Any], case: Case) -> dict[str, torch.Tensor]:
        return {"out": gelu_definition(inputs["x"].double())}

    def call(self, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, watch: Watch = nullcontext) -> CallOutput:
        with watch():
            out = fn(inputs["x"])
        return CallOutput({"out": out})

    def timed(self, fn: Callable[..., Any], inputs: dict[str, Any]) -> Callable[[], Any]:
        x = inputs["x"]
        return lambda: fn(x)

    def pytorch(self, inputs: dict[str, Any]) -> Callable[[], Any]:
        x = inputs["x"]
        return lambda: torch.nn.functional.gelu(x, approximate="tanh")

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, GeluCase)
        n = math.prod(case.shape)
        size = TORCH_DTYPES[case.dtype].itemsize
        return 2.0 * n * size, 0.0
