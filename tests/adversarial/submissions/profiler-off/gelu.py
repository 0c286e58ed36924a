"""Attack: switch the running profiler off around the PyTorch op."""
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
    torch.autograd._disable_profiler()
    return torch.nn.functional.gelu(x, approximate="tanh")
