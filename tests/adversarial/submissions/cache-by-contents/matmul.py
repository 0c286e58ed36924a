"""Serves C from a cache keyed on a cheap Triton fingerprint of the input contents.

The fingerprint (a strided sample of A and B, summed by one small kernel) costs far less than
the matmul. When timed rounds rotated a few input sets with fixed contents, every timed round
after the first few was a cache hit: the time was that of the fingerprint. With new contents
before every timed round, no round can hit. CACHE is the switch: the honest variant of this
entry (in the test) turns it off.
"""

import torch
import triton
import triton.language as tl

from correct_matmul import triton_matmul as full_matmul  # the correct example, copied in by the corpus test

CACHE = True
_cache: dict[tuple, torch.Tensor] = {}


@triton.jit
def _fingerprint(x_ptr, out_ptr, n, step, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK) * step
    x = tl.load(x_ptr + i, mask=i < n, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sum(x * (1.0 + tl.arange(0, BLOCK).to(tl.float32)), axis=0))


def _key(a: torch.Tensor, b: torch.Tensor, activation: str | None) -> tuple:
    prints = torch.empty(2, dtype=torch.float32, device=a.device)
    for i, t in enumerate((a, b)):
        n = t.untyped_storage().nbytes() // t.element_size()
        _fingerprint[(1,)](t, prints[i:], n, max(1, n // 1024), BLOCK=1024)
    return (tuple(a.shape), tuple(b.shape), a.dtype, activation, *prints.tolist())


def triton_matmul(a: torch.Tensor, b: torch.Tensor, activation: str | None = None) -> torch.Tensor:
    key = _key(a, b, activation) if CACHE else None
    if key in _cache:
        return _cache[key].clone()
    c = full_matmul(a, b, activation)
    if key is not None:
        _cache[key] = c.clone()
        while len(_cache) > 4:  # the last few shapes' inputs, as a cache that fits in memory keeps
            del _cache[next(iter(_cache))]
    return c
