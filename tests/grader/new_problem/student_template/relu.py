"""Problem 5: ReLU in Triton. Read assignment/README.md, section "5. ReLU"."""

import torch


def triton_relu(x: torch.Tensor) -> torch.Tensor:
    """max(x, 0) elementwise, computed by your Triton kernel; a new tensor like `x`."""
    raise NotImplementedError("triton_relu is not implemented yet: see assignment/README.md, section '5. ReLU'")
