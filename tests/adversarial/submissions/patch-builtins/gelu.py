"""Attack: replace builtins the harness uses to summarise the profile, then call PyTorch."""
import builtins
import torch
import triton
import triton.language as tl

_real_sorted = builtins.sorted


def _blind_sorted(items, *args, **kwargs):
    return [i for i in _real_sorted(items, *args, **kwargs) if not str(i).startswith("aten::")]


builtins.sorted = _blind_sorted


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def triton_gelu(x):
    _token[(1,)](torch.zeros(1, device=x.device))
    return torch.nn.functional.gelu(x, approximate="tanh")
