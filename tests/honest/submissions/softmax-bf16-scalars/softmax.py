"""Softmax that works in the input's own dtype where it is exact, as a student might write it.

Masked lanes are filled with a Python -inf on the loaded (bfloat16 / float16 / float32) values,
the row maximum is taken in that dtype, the values doubled with a Python 2 there (exact), and
only then converted to float32 for exp and the sum. Rows up to 4096 in one block; longer rows in
an online sweep over column blocks, so no block passes Triton's limit.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _one_block(x_ptr, y_ptr, n, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * sx + cols, mask=mask)
    x = tl.where(mask, x, -float("inf"))  # a Python scalar with the input's dtype
    m = tl.max(x, 0)  # in the input's dtype: exact
    twice = x * 2  # exact in any float dtype
    z = twice.to(tl.float32) * 0.5 - m.to(tl.float32)
    e = tl.exp(z)
    tl.store(y_ptr + row * sy + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _online(x_ptr, y_ptr, n, sx, sy, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    m = -float("inf")
    s = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + cols, mask=cols < n)
        x = tl.where(cols < n, x, -float("inf"))
        block_max = tl.max(x, 0).to(tl.float32)
        new_m = tl.maximum(m, block_max)
        s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x.to(tl.float32) - new_m), 0)
        m = new_m
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * sx + cols, mask=cols < n, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * sy + cols, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=cols < n)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    if x.stride(1) != 1:
        x = x.contiguous()
    rows, n = x.shape
    y = torch.empty((rows, n), dtype=x.dtype, device=x.device)
    if rows == 0 or n == 0:
        return y
    if n <= 4096:
        _one_block[(rows,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    else:
        _online[(rows,)](x, y, n, x.stride(0), y.stride(0), BLOCK=2048)
    return y
