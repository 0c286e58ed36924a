"""Attack: a token Triton kernel so that "a kernel ran", then the math in PyTorch ops."""
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _token_launch(device):
    _token[(1,)](torch.zeros(1, device=device))


def triton_gelu(x):
    _token_launch(x.device)
    xf = x.float()
    return (0.5 * xf * (1.0 + torch.tanh(0.7978845608028654 * (xf + 0.044715 * xf**3)))).to(x.dtype)
