"""Matmul on a 2-D grid (program (i, j) owns output tile (i, j)), GeLU epilogue from common.py."""

import triton
import triton.language as tl

from common import block_sizes, out_like, tanh_gelu


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GELU: tl.constexpr):
    i = tl.program_id(0)
    j = tl.program_id(1)
    rows = i * BM + tl.arange(0, BM)
    cols = j * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * sam + (k + ks)[None, :] * sak,
                    mask=(rows[:, None] < M) & ((k + ks)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + ks)[:, None] * sbk + cols[None, :] * sbn,
                    mask=((k + ks)[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    if GELU:
        acc = tanh_gelu(acc)
    tl.store(c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def triton_matmul(a, b, activation=None):
    M, K = a.shape
    N = b.shape[1]
    c = out_like((M, N), a)
    cfg = block_sizes(a, gpu={"BM": 128, "BN": 128, "BK": 32, "num_warps": 4, "num_stages": 4},
                      cpu={"BM": 16, "BN": 32, "BK": 16, "num_warps": 1})
    grid = (triton.cdiv(M, cfg["BM"]), triton.cdiv(N, cfg["BN"]))
    mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1), GELU=activation == "gelu", **cfg)
    return c
