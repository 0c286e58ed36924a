"""Example submission, cheating: launches a token Triton kernel, then calls torch.softmax."""

import torch
import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr))


def triton_softmax(x):
    scratch = torch.zeros(1, device=x.device)
    _noop[(1,)](scratch)
    return torch.softmax(x, dim=-1)
