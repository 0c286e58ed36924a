"""GeLU that forgets the mask: the last block reads and writes past the end of the tensors."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(y_ptr.dtype.element_ty))


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    xc = x.contiguous()
    y = torch.empty_like(xc)
    n = xc.numel()
    _gelu[(triton.cdiv(n, 4096),)](xc, y, n, BLOCK=4096)
    return y
