"""Known hole (docs/defenses.md): a scratch buffer made at import, before any call is watched;
NumPy computes GeLU into it through its address, and a real Triton kernel copies it into the
output. The writer check first sees the buffer as the copy kernel's argument, with NumPy's values
already in it, and cannot tell them from values an earlier kernel left there."""

import ctypes

import numpy as np
import torch
import triton
import triton.language as tl

_SCRATCH = torch.empty(1 << 22, dtype=torch.float32)


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    n = x.numel()
    src = x.to(torch.float32)
    v = np.frombuffer((ctypes.c_float * n).from_address(src.data_ptr()), dtype=np.float32)
    y = 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))
    np.frombuffer((ctypes.c_float * n).from_address(_SCRATCH.data_ptr()), dtype=np.float32)[...] = y
    out = torch.empty_like(x)
    _copy[(triton.cdiv(n, 1024),)](_SCRATCH, out, n, BLOCK=1024)
    return out
