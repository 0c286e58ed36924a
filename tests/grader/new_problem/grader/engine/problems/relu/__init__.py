"""A toy fifth problem, ReLU: the least a problem folder needs (a case model, the float64
definition, inputs and work; calls, timing and sampling come from OneTensorKind)."""

from __future__ import annotations

import math
from typing import Any

import torch
from pydantic import Field

from grader.engine.problems.base import TORCH_DTYPES, OneTensorKind
from grader.engine.spec.model import Case, DType


class ReluCase(Case):
    shape: list[int] = Field(min_length=1, max_length=4)
    dtype: DType


def relu_definition(x: torch.Tensor) -> torch.Tensor:
    return x.clamp_min(0.0)


class Relu(OneTensorKind):
    name = "relu"
    case_model = ReluCase
    definition = staticmethod(relu_definition)
    torch_op = staticmethod(torch.relu)

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        assert isinstance(case, ReluCase)
        x = torch.randn(*case.shape, generator=gen, device=gen.device)
        return {"x": x.to(TORCH_DTYPES[case.dtype])}

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, ReluCase)
        return 2.0 * math.prod(case.shape) * TORCH_DTYPES[case.dtype].itemsize, 0.0


KIND = Relu()
