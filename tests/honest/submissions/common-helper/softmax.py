"""Softmax, ROWS rows per program, online (max, sum) over column blocks, then a write sweep."""

import triton
import triton.language as tl

from common import block_sizes, out_like

NEG_INF = tl.constexpr(float("-inf"))


@triton.jit
def softmax_online(x_ptr, y_ptr, M, N, sxm, sxn, sym,
                   ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = r < M
    xrow = x_ptr + r.to(tl.int64)[:, None] * sxm
    yrow = y_ptr + r.to(tl.int64)[:, None] * sym
    c = tl.arange(0, BLOCK_N)
    m = tl.full([ROWS], NEG_INF, tl.float32)
    l = tl.zeros([ROWS], tl.float32)
    for n0 in range(0, N, BLOCK_N):
        cc = n0 + c
        x = tl.load(xrow + cc[None, :] * sxn, mask=live[:, None] & (cc[None, :] < N), other=NEG_INF)
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        # rows that have only seen -inf so far: measure from 0 so l stays 0 instead of nan
        ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        l = l * tl.exp(m - ref) + tl.sum(tl.exp(x - ref[:, None]), axis=1)
        m = m_new
    for n0 in range(0, N, BLOCK_N):
        cc = n0 + c
        inside = live[:, None] & (cc[None, :] < N)
        x = tl.load(xrow + cc[None, :] * sxn, mask=inside, other=NEG_INF).to(tl.float32)
        y = tl.exp(x - m[:, None]) / l[:, None]
        tl.store(yrow + cc[None, :], y.to(y_ptr.dtype.element_ty), mask=inside)


def triton_softmax(x):
    M, N = x.shape
    y = out_like((M, N), x)
    if M * N == 0:
        return y
    if N >= 8192:
        gpu = {"ROWS": 1, "BLOCK_N": 4096, "num_warps": 8}
    else:
        gpu = {"ROWS": 4, "BLOCK_N": min(1024, triton.next_power_of_2(N)), "num_warps": 4}
    cfg = block_sizes(x, gpu=gpu, cpu={"ROWS": 2, "BLOCK_N": 32, "num_warps": 1})
    softmax_online[(triton.cdiv(M, cfg["ROWS"]),)](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), **cfg)
    return y
