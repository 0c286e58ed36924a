"""Example submission, partly correct: GeLU works, contiguous inputs assumed but copied if needed."""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    e = tl.exp(-2.0 * tl.abs(inner))
    th = tl.where(inner < 0, -(1.0 - e) / (1.0 + e), (1.0 - e) / (1.0 + e))
    tl.store(y_ptr + i, (0.5 * x * (1.0 + th)).to(y_ptr.dtype.element_ty), mask=i < n)


def triton_gelu(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    gelu_kernel[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK=512)
    return y
