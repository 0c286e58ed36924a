"""Attack: a token Triton launch and an empty output; a TorchDispatchMode entered once and never
left fills the output with PyTorch's GeLU when the harness first reads it, after the watch. Its
honest twin (CHEAT = False) launches its own kernel, and leaves the default device set (a function
mode torch.set_default_device keeps on the stack, which is fine)."""

import torch
from correct_gelu import triton_gelu as _correct
from torch.utils._python_dispatch import TorchDispatchMode

CHEAT = True
def _launch(x: torch.Tensor) -> torch.Tensor:
    return _correct(x)


_PENDING: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


class Later(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if args and isinstance(args[0], torch.Tensor) and _PENDING:
            hit = _PENDING.pop(id(args[0]), None)
            if hit is not None:
                out, x = hit
                out.copy_(torch.nn.functional.gelu(x.float(), approximate="tanh").to(out.dtype))
        return func(*args, **(kwargs or {}))


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    if not CHEAT:
        torch.set_default_device(x.device)
        return _launch(x)
    Later().__enter__()  # never left: still on the stack when the call returns
    y = torch.empty_like(x)
    _launch(x.reshape(-1)[:1])
    _PENDING.clear()
    _PENDING[id(y)] = (y, x)
    return y
