"""Its Triton kernel for every correctness call; once the calls pile up, PyTorch's GeLU plus a token
Triton launch on one element, so every call still launches a Triton kernel.

Correctness watches every call, and timing counted launches per round: one token launch per call
passed that count, and PyTorch's speed was scored. Only a chunk of timed rounds watched by the
profiler sees the aten::gelu. TRITON_CALLS is the switch: the honest variant sets it huge.
"""

import torch

from correct_gelu import triton_gelu as _triton_gelu  # the correct example's kernel, copied in by the corpus test

TRITON_CALLS = 150
_calls = 0


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    global _calls
    _calls += 1
    if _calls > TRITON_CALLS:
        _triton_gelu(x.reshape(-1)[:1])  # a token launch: the launch count stays one per call
        return torch.nn.functional.gelu(x, approximate="tanh")
    return _triton_gelu(x)
