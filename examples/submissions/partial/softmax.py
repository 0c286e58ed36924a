"""Example submission, partly correct: softmax that only handles rows fitting in one block."""

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_x + cols, mask=cols < n, other=float("-inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride_y + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < n)


def triton_softmax(x):
    m, n = x.shape
    y = torch.empty_like(x)
    # bug on purpose: long rows are cut at 1024 columns, and column strides are ignored
    softmax_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=1024)
    return y
