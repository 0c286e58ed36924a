"""Problem 1: GeLU (tanh approximation) in Triton.

Read assignment/README.md, section "1. GeLU", before you start.
"""

from __future__ import annotations

import torch
import triton  # noqa: F401  (you will need these)
import triton.language as tl  # noqa: F401


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    """tanh-approximate GeLU of `x`, elementwise, computed by your Triton kernel.

    Any shape and any strides; float32, float16 or bfloat16. Returns a new tensor with the same
    shape, dtype and device as `x`; `x` itself must not change.
    """
    raise NotImplementedError("triton_gelu is not implemented yet: see assignment/README.md, section '1. GeLU'")
