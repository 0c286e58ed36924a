"""GeLU that walks any strided tensor (up to 4-D) without copying it: each program turns its
flat output indices back into (i0, i1, i2, i3) and gathers the input through the strides."""

import triton
import triton.language as tl

from common import block_sizes, out_like, tanh_gelu


@triton.jit
def gelu_strided(x_ptr, y_ptr, numel, d1, d2, d3, s0, s1, s2, s3, BLOCK: tl.constexpr):
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < numel
    i3 = idx % d3
    rest = idx // d3
    i2 = rest % d2
    rest = rest // d2
    i1 = rest % d1
    i0 = rest // d1
    src = i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3
    x = tl.load(x_ptr + src, mask=mask).to(tl.float32)
    tl.store(y_ptr + idx, tanh_gelu(x).to(y_ptr.dtype.element_ty), mask=mask)


def triton_gelu(x):
    if x.dim() > 4:
        raise ValueError("triton_gelu handles up to 4-D tensors")
    shape = [1] * (4 - x.dim()) + list(x.shape)
    strides = [0] * (4 - x.dim()) + list(x.stride())
    y = out_like(x.shape, x)  # contiguous output, filled in flat order
    n = x.numel()
    if n == 0:
        return y
    cfg = block_sizes(x, gpu={"BLOCK": 2048, "num_warps": 8}, cpu={"BLOCK": 256, "num_warps": 1})
    grid = (triton.cdiv(n, cfg["BLOCK"]),)
    gelu_strided[grid](x, y, n, shape[1], shape[2], shape[3], *strides, **cfg)
    return y
