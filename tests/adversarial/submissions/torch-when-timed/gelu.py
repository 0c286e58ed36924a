"""Right, and a Triton kernel, for every correctness call; PyTorch's GeLU once the calls pile up.

Correctness makes a few dozen calls and watches them (the first timed call is watched too); a
timed window makes hundreds. Past TRITON_CALLS this returns PyTorch's result, which is right, so
only the kernel rule catches it: before timed calls were held to it, PyTorch's speed was scored.
TRITON_CALLS is the switch: the honest variant of this entry (in the test) sets it to a huge number.
"""

import torch

from correct_gelu import triton_gelu as _triton_gelu  # the correct example's kernel, copied in by the corpus test

TRITON_CALLS = 150
_calls = 0


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    global _calls
    _calls += 1
    if _calls > TRITON_CALLS:
        return torch.nn.functional.gelu(x, approximate="tanh")
    return _triton_gelu(x)
