"""Right for the first calls of each shape, then computes only the top half of C.

Correctness calls each case twice, so every correctness case sees full work; by the time a
benchmark shape is timed, only half of the row tiles are launched and the rest of C is whatever
the allocator left there. Before timed calls were checked this scored 0.81-0.91 of the reference.
FULL_CALLS is the switch: the honest variant of this entry (in the test) sets it to a huge number.
"""

import torch
import triton

from correct_matmul import _matmul  # the correct example's kernel, copied in by the corpus test

FULL_CALLS = 3
_calls: dict[tuple, int] = {}


def triton_matmul(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    M, K = a.shape
    N = b.shape[1]
    # per call signature: correctness calls each case twice, so every one of them sees full work
    key = (M, N, K, a.dtype, activation, a.stride(), b.stride())
    seen = _calls[key] = _calls.get(key, 0) + 1
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    rows = triton.cdiv(M, 64)
    if seen > FULL_CALLS:
        rows = max(1, rows // 2)
    _matmul[(rows, triton.cdiv(N, 64))](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                       c.stride(0), c.stride(1), GELU=activation == "gelu", BM=64, BN=64, BK=32)
    return c
