"""Problem 4: FlashAttention-2, forward in Triton, backward recomputing from the logsumexp.

Read assignment/README.md, section "4. FlashAttention-2", before you start.
"""

from __future__ import annotations

from typing import Any

import torch
import triton  # noqa: F401
import triton.language as tl  # noqa: F401


class FlashAttention2(torch.autograd.Function):
    """softmax(q k^T / sqrt(D)) v with a Triton forward and a backward that recomputes P from L."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        """q: (B, H, Nq, D); k, v: (B, H, Nk, D). Save the float32 logsumexp L (B, H, Nq) for backward."""
        raise NotImplementedError(
            "FlashAttention2.forward is not implemented yet: see assignment/README.md, section '4. FlashAttention-2'"
        )

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """Return dq, dk, dv (and None for is_causal), recomputing P from the saved L."""
        raise NotImplementedError(
            "FlashAttention2.backward is not implemented yet: see assignment/README.md, section '4. FlashAttention-2'"
        )


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """Attention with scale 1/sqrt(D); causal hides key j from query i when j > i."""
    return FlashAttention2.apply(q, k, v, is_causal)
