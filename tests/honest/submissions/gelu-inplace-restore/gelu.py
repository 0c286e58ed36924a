"""GeLU computed in place on a copy of x.

I copy x into a fresh contiguous buffer (torch's copy_ handles every stride pattern) and run an
in-place kernel over it. Because the kernel overwrites its input, autotuning would otherwise apply
GeLU several times (once per config tried): restore_value=["buf_ptr"] puts the buffer back
between configs. cache_results keeps the winning config on disk between runs.
"""

import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 2048}, num_warps=8),
        triton.Config({"BLOCK": 4096}, num_warps=8),
        triton.Config({"BLOCK": 8192}, num_warps=16),
    ],
    key=["n"],
    restore_value=["buf_ptr"],
    cache_results=True,
)
@triton.jit
def gelu_inplace(buf_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    in_range = offsets < n
    v = tl.load(buf_ptr + offsets, mask=in_range).to(tl.float32)
    inner = 0.7978845608028654 * v * (1.0 + 0.044715 * v * v)
    # tanh via sigmoid: tanh(z) = 2 sigmoid(2z) - 1
    out = 0.5 * v * (1.0 + (2.0 * tl.sigmoid(2.0 * inner) - 1.0))
    tl.store(buf_ptr + offsets, out.to(buf_ptr.dtype.element_ty), mask=in_range)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    buf = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    buf.copy_(x)  # never touch x itself
    n = buf.numel()
    if n:
        gelu_inplace[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](buf, n)
    return buf
