"""New normal values for a timed round's inputs, drawn on the GPU at about the speed of writing them.

Verified timing refills every input before every timed round (grader/timed_rounds.py). PyTorch's
`normal_` did that at about 400 G values/s on the H200, which for GeLU's 16384² inputs cost as
much as the kernel being timed (docs/performance.md). This kernel draws four normals per Philox
call (Triton's `randn4x`) and stores each quarter of its block contiguously, so the fill is
bound by the stores rather than by the generator.

The values depend only on the round's seed, the tensor's place in the refill and the element's
index: the worker and the orchestrator, each with its own copy of this code, draw the same ones.
CPU tensors (the interpreter's grading) and layouts that do not own their storage contiguously
keep PyTorch's `normal_`, which is just as deterministic on one device.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024  # Philox counters per program; each program writes 4 * BLOCK values
_GOLDEN = 0x9E3779B9  # spreads the per-tensor seeds of one refill apart


@triton.jit(do_not_specialize=["seed"])
def _normal_kernel(out_ptr, n, seed, std, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    counter = pid * BLOCK + tl.arange(0, BLOCK)
    r0, r1, r2, r3 = tl.randn4x(seed, counter)
    base = pid.to(tl.int64) * 4 * BLOCK + tl.arange(0, BLOCK)
    kind = out_ptr.dtype.element_ty
    tl.store(out_ptr + base, (r0 * std).to(kind), mask=base < n)
    tl.store(out_ptr + base + BLOCK, (r1 * std).to(kind), mask=base + BLOCK < n)
    tl.store(out_ptr + base + 2 * BLOCK, (r2 * std).to(kind), mask=base + 2 * BLOCK < n)
    tl.store(out_ptr + base + 3 * BLOCK, (r3 * std).to(kind), mask=base + 3 * BLOCK < n)


def fast(t: torch.Tensor) -> bool:
    """Whether `t` can take the kernel: a contiguous floating-point CUDA tensor of < 2^33 values."""
    return t.is_cuda and t.is_contiguous() and t.is_floating_point() and t.numel() < (1 << 31) * 4


def normal_(tensors: list[torch.Tensor], gen: torch.Generator, std: float = 1.0) -> None:
    """Fill each tensor with normal values of standard deviation `std`, in place, from `gen`'s seed."""
    seed = gen.initial_seed()
    for place, t in enumerate(tensors):
        if not fast(t):
            t.normal_(0.0, std, generator=gen)
            continue
        with torch.cuda.device(t.device):
            draw(t, (seed + place * _GOLDEN) % (1 << 31), std)


def draw(t: torch.Tensor, seed: int, std: float) -> None:
    """The kernel's launch over a contiguous tensor (also what the CPU tests run, interpreted)."""
    n = t.numel()
    _normal_kernel[(triton.cdiv(n, 4 * BLOCK),)](t, n, seed, float(std), BLOCK=BLOCK)
