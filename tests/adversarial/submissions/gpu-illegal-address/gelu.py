"""Attack (GPU): a kernel that stores far outside any allocation (CUDA illegal address)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _wild(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs + (1 << 40), tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def triton_gelu(x):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    _wild[(triton.cdiv(xc.numel(), 1024),)](xc, y, xc.numel(), BLOCK=1024)
    return y
