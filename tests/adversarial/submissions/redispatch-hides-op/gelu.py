"""Attack: a token Triton launch, then aten::gelu itself through OpOverload.redispatch, which runs
the op's kernel past the dispatcher's RecordFunction (the profiler recorded nothing). Its honest
twin (CHEAT = False) launches its own kernel."""

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True


def _launch(x: torch.Tensor) -> torch.Tensor:
    return _correct(x)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    if not CHEAT:
        return _launch(x)
    _launch(x.reshape(-1)[:1])  # "a Triton kernel ran"
    key = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return torch.ops.aten.gelu.default.redispatch(torch._C.DispatchKeySet(key), x, approximate="tanh")
