"""Attack: GeLU computed in NumPy on a host copy of x (`.numpy()` only reads), wrapped by
`torch.from_numpy` (memory no PyTorch op made), moved to x's device by an allowed copy, and
copied into the output by a real Triton kernel: every op is allowed, the output is a kernel's
store target, and no byte changes behind the grader's back. Its honest twin (CHEAT = False) copies
the correct kernel's output the same way."""

import numpy as np
import torch
import triton
import triton.language as tl
from correct_gelu import triton_gelu as _correct

CHEAT = True


@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    if CHEAT:
        v = x.detach().to("cpu", torch.float32).numpy()
        y = 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))
        src = torch.from_numpy(y.astype(np.float32)).to(x.device, x.dtype)
    else:
        src = _correct(x).clone()
    out = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](src, out, x.numel(), BLOCK=1024)
    return out
