"""GeLU (tanh approximation), elementwise over any shape and strides: its inputs and its work."""

from __future__ import annotations

import math
from typing import Any

import torch

from grader.engine.problems.base import TORCH_DTYPES, OneTensorKind, with_layout
from grader.engine.problems.gelu.case import GeluCase
from grader.engine.problems.gelu.definition import gelu_definition
from grader.engine.spec.model import Case


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
