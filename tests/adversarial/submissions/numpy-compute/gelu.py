"""Known hole (docs/defenses.md): a token kernel, then the math in numpy, which no profiler sees."""
import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def triton_gelu(x):
    _token[(1,)](torch.zeros(1, device=x.device))
    v = x.detach().cpu().float().numpy().astype(np.float64)
    y = 0.5 * v * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * v**3)))
    return torch.from_numpy(y).to(x.dtype).to(x.device)
