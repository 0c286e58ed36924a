"""What a GeLU case in the spec may say: any shape up to 4-D, a dtype, a memory layout, special values."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grader.spec import Case, DType


class GeluCase(Case):
    shape: list[int] = Field(min_length=1, max_length=4)
    dtype: DType
    layout: Literal["contiguous", "transposed", "strided", "offset"] = "contiguous"
    values: Literal["normal", "large", "nan"] = "normal"
