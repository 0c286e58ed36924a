"""Tiled matrix multiplication (M, K) @ (K, N), optionally with GeLU fused into the epilogue: what a
case may say (M, N, K, a dtype, a fused activation, each operand's layout), the float64 definition
(GeLU's own for the epilogue), its inputs, calls, timed work and the rows and columns a timed
round checks."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Literal

import torch
from pydantic import Field

from grader.engine.problems.base import SAMPLE_ROWS, TORCH_DTYPES, CallOutput, ProblemKind, Watch, pick, with_layout
from grader.engine.problems.gelu.kind import gelu_definition
from grader.engine.spec.model import SHORT_DTYPE, Case, DType

Layout = Literal["contiguous", "transposed", "strided"]


class MatmulCase(Case):
    m: int = Field(ge=1)
    n: int = Field(ge=1)
    k: int = Field(ge=1)
    dtype: DType
    activation: Literal["none", "gelu"] = "none"
    layout_a: Layout = "contiguous"
    layout_b: Layout = "contiguous"

    def describe(self) -> str:
        size = f"{self.m}³" if self.m == self.n == self.k else f"{self.m}×{self.n}×{self.k}"
        text = f"{size} {SHORT_DTYPE[self.dtype]}"
        return text if self.activation == "none" else f"{text} + {self.activation}"


def matmul_definition(a: torch.Tensor, b: torch.Tensor, activation: str | None) -> torch.Tensor:
    out = a @ b
    return gelu_definition(out) if activation == "gelu" else out


class Matmul(ProblemKind):
    name = "matmul"
    case_model = MatmulCase
    output_names = ("out",)
    uses_dot = True

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        assert isinstance(case, MatmulCase)
        dtype = TORCH_DTYPES[case.dtype]
        # scaled so that every output element has unit variance whatever K is
        scale = case.k**-0.25
        a = (torch.randn(case.m, case.k, generator=gen, device=gen.device) * scale).to(dtype)
        b = (torch.randn(case.k, case.n, generator=gen, device=gen.device) * scale).to(dtype)
        return {
            "a": with_layout(a, case.layout_a, gen),
            "b": with_layout(b, case.layout_b, gen),
            "activation": None if case.activation == "none" else case.activation,
        }

    def expected(self, inputs: dict[str, Any], case: Case) -> dict[str, torch.Tensor]:
        return {"out": matmul_definition(inputs["a"].double(), inputs["b"].double(), inputs["activation"])}

    def call(
        self, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, watch: Watch = nullcontext
    ) -> CallOutput:
        with watch():
            if inputs["activation"] is None:
                out = fn(inputs["a"], inputs["b"])
            else:
                out = fn(inputs["a"], inputs["b"], activation=inputs["activation"])
        return CallOutput({"out": out})

    def timed(self, fn: Callable[..., Any], inputs: dict[str, Any]) -> Callable[[], Any]:
        a, b, act = inputs["a"], inputs["b"], inputs["activation"]
        return (lambda: fn(a, b)) if act is None else (lambda: fn(a, b, activation=act))

    def pytorch(self, inputs: dict[str, Any]) -> Callable[[], Any]:
        a, b, act = inputs["a"], inputs["b"], inputs["activation"]
        if act is None:
            return lambda: torch.matmul(a, b)
        return lambda: torch.nn.functional.gelu(torch.matmul(a, b), approximate="tanh")

    def refill(self, inputs: dict[str, Any], case: Case, gen: torch.Generator) -> None:
        assert isinstance(case, MatmulCase)
        for name in ("a", "b"):
            inputs[name].normal_(0.0, case.k**-0.25, generator=gen)

    def sample(self, case: Case, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """Whole rows and whole columns of C: a kernel that skips any band of tiles shows."""
        assert isinstance(case, MatmulCase)
        return {"rows": pick(gen, case.m, SAMPLE_ROWS), "cols": pick(gen, case.n, SAMPLE_ROWS)}

    def output_shape(self, output: str, case: Case) -> tuple[int, ...]:
        assert isinstance(case, MatmulCase)
        return (case.m, case.n)

    def take(
        self, outputs: dict[str, torch.Tensor], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        out = outputs["out"]
        return {"out[rows]": out[plan["rows"]], "out[cols]": out[:, plan["cols"]]}

    def expected_sample(
        self, inputs: dict[str, Any], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        a, b, act = inputs["a"], inputs["b"], inputs["activation"]
        return {
            "out[rows]": matmul_definition(a[plan["rows"]].double(), b.double(), act),
            "out[cols]": matmul_definition(a.double(), b[:, plan["cols"]].double(), act),
        }

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, MatmulCase)
        size = TORCH_DTYPES[case.dtype].itemsize
        return float(case.m * case.k + case.k * case.n + case.m * case.n) * size, 2.0 * case.m * case.n * case.k
