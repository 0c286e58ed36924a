"""Known hole (docs/defenses.md): a token kernel, then GeLU in NumPy on arrays made from the
tensors' raw addresses with ctypes, which dispatches no PyTorch op at all (`.numpy()` would run
`resolve_conj`, which the allow-list refuses). What closes it is the writer check (issue 50): the
output's memory is written by no Triton launch."""

import ctypes

import numpy as np
import torch
import triton
import triton.language as tl

_NP = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: np.uint16}


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _array(t: torch.Tensor) -> np.ndarray:
    raw = (ctypes.c_byte * (t.numel() * t.element_size())).from_address(t.data_ptr())
    return np.frombuffer(raw, dtype=_NP[t.dtype]).reshape(t.shape)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    _token[(1,)](torch.zeros(1, device=x.device))
    x = x.contiguous()
    out = torch.empty_like(x)
    src, dst = _array(x), _array(out)
    v = (src.astype(np.uint32) << 16).view(np.float32) if x.dtype == torch.bfloat16 else src.astype(np.float32)
    y = 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))
    if x.dtype == torch.bfloat16:
        bits = y.astype(np.float32).view(np.uint32)
        dst[...] = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    else:
        dst[...] = y.astype(_NP[x.dtype])
    return out
