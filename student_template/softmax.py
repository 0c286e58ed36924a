"""Problem 2: softmax over the last dimension, including rows far longer than one block.

Read assignment/README.md, section "2. Softmax", before you start.
"""

from __future__ import annotations

import torch
import triton  # noqa: F401
import triton.language as tl  # noqa: F401


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax of a 2-D tensor (M, N) over its last dimension, computed by your Triton kernel(s).

    N may be far larger than one block holds (use online softmax over column blocks); rows may be
    strided. float32, float16 or bfloat16, accumulating in float32. Returns a new tensor.
    """
    raise NotImplementedError("triton_softmax is not implemented yet: see assignment/README.md, section '2. Softmax'")
