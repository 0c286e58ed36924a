"""Example submission, partly correct: the matmul is right, but `activation` is ignored."""

import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a, b, c, M, N, K, sa0, sa1, sb0, sb1, sc0, sc1, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        ks = k0 + tl.arange(0, BK)
        ta = tl.load(a + rows[:, None] * sa0 + ks[None, :] * sa1, mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        tb = tl.load(b + ks[:, None] * sb0 + cols[None, :] * sb1, mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(ta, tb, acc)
    tl.store(c + rows[:, None] * sc0 + cols[None, :] * sc1, acc.to(c.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def triton_matmul(a, b, activation=None):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    mm_kernel[(triton.cdiv(M, 32), triton.cdiv(N, 32))](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BM=32, BN=32, BK=16)
    return c
