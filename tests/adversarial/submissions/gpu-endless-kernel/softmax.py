"""Attack: a Triton kernel that never ends. It spins on a flag nobody sets, so on a GPU the kernel
keeps running after its worker is stopped (SIGSTOP does not stop a GPU), until the worker is killed."""

import torch
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    while tl.load(flag_ptr) == 0:  # never set: the loop never ends
        tl.store(y_ptr + offsets, tl.zeros([BLOCK], tl.float32), mask=offsets < n)


def triton_softmax(x):
    y = torch.empty_like(x)
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    _spin[(1,)](flag, y, y.numel(), BLOCK=16)
    return y
