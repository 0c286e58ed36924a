"""What a softmax case in the spec may say: an (M, N) shape, a dtype, a row layout, special values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class SoftmaxCase(Case):
    shape: list[int] = Field(min_length=2, max_length=2)
    dtype: DType
    layout: Literal["contiguous", "padded_rows", "offset"] = "contiguous"
    values: Literal["normal", "large", "neg_inf", "constant", "all_neg_inf"] = "normal"

    def describe(self) -> str:
        return with_layout_note(f"`{self.shape}` {SHORT_DTYPE[self.dtype]}", self.layout)
