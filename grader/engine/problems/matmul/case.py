"""What a matmul case in the spec may say: M, N, K, a dtype, a fused activation, each operand's layout."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

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
