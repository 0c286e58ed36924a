"""Attack (GPU): a token Triton launch, then GeLU by a CUDA kernel that torch.cuda.jiterator
compiles from a C++ string and launches past PyTorch's dispatcher: no aten op is recorded for it.
Its honest twin (CHEAT = False) builds the same jitted function and returns the Triton kernel's
output."""

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True

_CODE = """
template <typename T> T tanh_gelu(T x) {
    return T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
}
"""
_gelu = torch.cuda.jiterator._create_jit_fn(_CODE)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    y = _correct(x)
    if not CHEAT:
        return y
    return _gelu(x.float()).to(x.dtype)
