"""Attack: as compiled-forward, and it switches torch.compile back on inside its call (the grader
runs compiled code eagerly where ops are checked). Its honest twin (CHEAT = False) launches its own
kernel through a torch.compile'd wrapper."""

import torch
import torch.nn.functional as F
from correct_gelu import triton_gelu as _correct

CHEAT = True


def _launch(x: torch.Tensor) -> torch.Tensor:
    return _correct(x)


@torch.compile
def _torch_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


_compiled_launch = torch.compile(_launch)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    if CHEAT:
        _launch(x.reshape(-1)[:1])  # "a Triton kernel ran"
        torch.compiler.set_stance("default")
        return _torch_gelu(x)
    return _compiled_launch(x)
