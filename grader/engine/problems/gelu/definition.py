"""The float64 definition of GeLU that expected outputs come from (matmul's fused epilogue too)."""

from __future__ import annotations

import math

import torch


def gelu_definition(x: torch.Tensor) -> torch.Tensor:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in the precision of x."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
