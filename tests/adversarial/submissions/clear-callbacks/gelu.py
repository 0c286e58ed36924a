"""Attack: removes the profiler's op-recording callback with torch._C._autograd._clear_callbacks(),
then computes GeLU in PyTorch. Its honest twin (CHEAT = False) launches its own kernel inside a
record_function range of its own (a student profiling their code)."""

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    if not CHEAT:
        with torch.autograd.profiler.record_function("my gelu"):
            return _correct(x)
    _correct(x.reshape(-1)[:1])  # "a Triton kernel ran"
    torch._C._autograd._clear_callbacks()
    return torch.nn.functional.gelu(x, approximate="tanh")
