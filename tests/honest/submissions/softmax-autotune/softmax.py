"""Softmax: one program per row, online (max, sum) in a single sweep, then a normalize sweep.

Autotuned over the column block and warps (lecture 6 said: let the autotuner pick).
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_N": 1024}, num_warps=4),
        triton.Config({"BLOCK_N": 2048}, num_warps=8),
        triton.Config({"BLOCK_N": 4096}, num_warps=8),
        triton.Config({"BLOCK_N": 8192}, num_warps=16),
    ],
    key=["N"],
)
@triton.jit
def softmax_rows(inp, outp, N, in_row_stride, in_col_stride, out_row_stride,
                 BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    src = inp + row * in_row_stride
    dst = outp + row * out_row_stride
    cols = tl.arange(0, BLOCK_N)

    # sweep 1: running max and running sum of exp(x - max)
    mx = tl.full([BLOCK_N], float("-inf"), tl.float32)
    sm = tl.zeros([BLOCK_N], tl.float32)
    for off in range(0, N, BLOCK_N):
        c = off + cols
        x = tl.load(src + c * in_col_stride, mask=c < N, other=float("-inf")).to(tl.float32)
        new_mx = tl.maximum(mx, x)
        # lanes that have only seen -inf keep sum 0 (avoid exp(-inf - -inf) = nan)
        safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
        sm = sm * tl.exp(mx - safe) + tl.exp(x - safe)
        mx = new_mx
    # combine the lanes
    row_max = tl.max(mx, axis=0)
    safe_row = tl.where(row_max == float("-inf"), 0.0, row_max)
    total = tl.sum(sm * tl.exp(mx - safe_row), axis=0)

    # sweep 2: write exp(x - max) / sum  (an all -inf row gives 0/0 = nan like torch)
    for off in range(0, N, BLOCK_N):
        c = off + cols
        x = tl.load(src + c * in_col_stride, mask=c < N, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) / total
        tl.store(dst + c, y.to(outp.dtype.element_ty), mask=c < N)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.ndim == 2, "expected (M, N)"
    M, N = x.shape
    out = torch.empty((M, N), dtype=x.dtype, device=x.device)
    if M == 0 or N == 0:
        return out
    softmax_rows[(M,)](x, out, N, x.stride(0), x.stride(1), out.stride(0))
    return out
