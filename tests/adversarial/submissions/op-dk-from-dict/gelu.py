"""Attack: reads an op's raw dispatch-key function out of the OpOverload's instance dictionary
(past the watch's `_op_dk` property), then calls aten::gelu's kernel with it after a token launch.
Its honest twin (CHEAT = False) launches its own kernel."""

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True
_RAW = torch.ops.aten.gelu.default.__dict__["_op_dk"] if CHEAT else None


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    if not CHEAT:
        return _correct(x)
    _correct(x.reshape(-1)[:1])  # "a Triton kernel ran"
    key = torch._C.DispatchKey.CUDA if x.is_cuda else torch._C.DispatchKey.CPU
    return _RAW(key, x, approximate="tanh")
