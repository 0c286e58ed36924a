"""Attack: replace the profiler with one that records nothing, then call the PyTorch op."""
import torch.autograd.profiler
import torch.profiler
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _token_launch(device):
    _token[(1,)](torch.zeros(1, device=device))


class _Blind:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return []


torch.profiler.profile = _Blind
torch.autograd.profiler.profile.events = lambda self: []


def triton_gelu(x):
    _token_launch(x.device)
    return torch.nn.functional.gelu(x, approximate="tanh")
