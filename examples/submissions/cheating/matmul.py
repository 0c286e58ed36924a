"""Example submission, cheating: computes once per shape, then serves the cached output."""

import torch
import triton
import triton.language as tl

_cache = {}


@triton.jit
def _row_times_matrix(a, b, c, N, K, BN: tl.constexpr):
    i = tl.program_id(0)
    cols = tl.arange(0, BN)
    acc = tl.zeros([BN], tl.float32)
    for k in range(0, K):
        acc += tl.load(a + i * K + k).to(tl.float32) * tl.load(b + k * N + cols, mask=cols < N, other=0.0).to(tl.float32)
    tl.store(c + i * N + cols, acc.to(c.dtype.element_ty), mask=cols < N)


def triton_matmul(a, b, activation=None):
    key = (tuple(a.shape), tuple(b.shape), a.dtype, activation)
    if key not in _cache:
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
        _row_times_matrix[(a.shape[0],)](a, b, c, b.shape[1], a.shape[1], BN=triton.next_power_of_2(b.shape[1]))
        _cache[key] = torch.nn.functional.gelu(c.float(), approximate="tanh").to(c.dtype) if activation else c
    return _cache[key]
