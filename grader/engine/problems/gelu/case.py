"""What a GeLU case in the spec may say: any shape up to 4-D, a dtype, a memory layout, special values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class GeluCase(Case):
    shape: list[int] = Field(min_length=1, max_length=4)
    dtype: DType
    layout: Literal["contiguous", "transposed", "strided", "offset"] = "contiguous"
    values: Literal["normal", "large", "nan"] = "normal"

    def describe(self) -> str:
        return with_layout_note(f"`{self.shape}` {SHORT_DTYPE[self.dtype]}", self.layout)
