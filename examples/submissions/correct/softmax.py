"""A correct student softmax: one program per row, two passes over column blocks."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax(x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        new_m = tl.maximum(m, x)
        # lanes that have seen only -inf keep a zero sum (avoid -inf - -inf = nan)
        safe = tl.where(new_m == float("-inf"), 0.0, new_m)
        s = s * tl.exp(m - safe) + tl.exp(x - safe)
        m = new_m
    row_max = tl.max(m, 0)
    safe_max = tl.where(row_max == float("-inf"), 0.0, row_max)
    total = tl.sum(s * tl.exp(m - safe_max), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    if x.stride(1) != 1:
        x = x.contiguous()
    m, n = x.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(n), 2048)
    _softmax[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=block)
    return y
