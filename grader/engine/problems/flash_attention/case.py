"""What an attention case in the spec may say: B, H, Nq, Nk, a head dimension, a dtype, causal, layout."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class AttentionCase(Case):
    b: int = Field(ge=1)
    h: int = Field(ge=1)
    nq: int = Field(ge=1)
    nk: int = Field(ge=1)
    d: Literal[16, 32, 64, 128]
    dtype: DType
    causal: bool = False
    #: "bnhd": q, k, v are (B, H, N, D) views of (B, N, H, D) memory, as after a head split
    layout: Literal["contiguous", "bnhd"] = "contiguous"

    def describe(self) -> str:
        seq = f"N={self.nq}" if self.nq == self.nk else f"Nq={self.nq} Nk={self.nk}"
        text = f"B={self.b} H={self.h} {seq} D={self.d} {SHORT_DTYPE[self.dtype]}" + (" causal" if self.causal else "")
        return with_layout_note(text, self.layout)
