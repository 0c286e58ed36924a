"""GeLU evaluated in float64 inside the kernel (cheap insurance against cancellation), rounded once on the store."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu64(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32).to(tl.float64)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = x / (1.0 + tl.exp(-2.0 * u))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    y = torch.empty_like(xc)
    n = xc.numel()
    if n:
        BLOCK = 1024 if x.is_cuda else 128
        _gelu64[(triton.cdiv(n, BLOCK),)](xc, y, n, BLOCK=BLOCK)
    return y
