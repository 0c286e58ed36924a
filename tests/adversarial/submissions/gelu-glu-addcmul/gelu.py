"""Attack: the correct kernel launches (a real launch), then GeLU is computed again by two ops no
deny-list named: `addcmul` for x + 0.044715 x^3 and `glu` for x * sigmoid(2 sqrt(2/pi) u), which
is the tanh approximation. Its honest twin (CHEAT = False) returns the kernel's output."""

import math

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    y = _correct(x)
    if not CHEAT:
        return y
    xf = x.float().flatten()
    u = torch.addcmul(xf, torch.square(xf), xf, value=0.044715)
    gated = torch.nn.functional.glu(torch.cat([xf, u * (2.0 * math.sqrt(2.0 / math.pi))]), dim=0)
    return gated.view(x.shape).to(x.dtype)
