"""Attack: the forward launches a token Triton kernel and returns an empty O beside an empty L;
attention itself (matmul, softmax, logsumexp in PyTorch) runs in a saved-tensor unpack hook, when
the grader reads the saved tensors to find L, which used to happen after the watched forward. Its
honest twin (CHEAT = False) runs the correct solution under identity saved-tensor hooks (as
torch.autograd.graph.save_on_cpu does)."""

import math

import torch
import triton
import triton.language as tl
from correct_flash_attention import flash_attention as _correct

CHEAT = True


@triton.jit
def _token(o_ptr):
    pass


def _attention(q, k, v, causal):  # type: ignore[no-untyped-def]
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        nq, nk = s.shape[-2:]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype), torch.logsumexp(s, -1)


_STATE: dict[int, tuple] = {}


def _pack(t: torch.Tensor) -> torch.Tensor:
    return t


def _unpack(t: torch.Tensor) -> torch.Tensor:
    job = _STATE.pop(id(t), None)
    if job is not None:  # the first read of the saved L: fill O and L now
        q, k, v, o, causal = job
        with torch.no_grad():
            o_val, lse = _attention(q, k, v, causal)
            o.copy_(o_val)
            t.copy_(lse)
    return t


class Empty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):  # type: ignore[no-untyped-def]
        o = torch.empty_like(q)
        lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
        _token[(1,)](o)
        ctx.save_for_backward(q, k, v, lse)
        ctx.causal = is_causal
        _STATE.clear()
        _STATE[id(lse)] = (q.detach(), k.detach(), v.detach(), o, is_causal)
        return o

    @staticmethod
    def backward(ctx, grad_out):  # type: ignore[no-untyped-def]
        q, k, v, lse = ctx.saved_tensors
        with torch.enable_grad():
            qq, kk, vv = (t.detach().requires_grad_(True) for t in (q, k, v))
            o, _ = _attention(qq, kk, vv, ctx.causal)
            dq, dk, dv = torch.autograd.grad(o, (qq, kk, vv), grad_out)
        return dq, dk, dv, None


def flash_attention(q, k, v, is_causal=False):  # type: ignore[no-untyped-def]
    with torch.autograd.graph.saved_tensors_hooks(_pack, _unpack):
        if not CHEAT:
            return _correct(q, k, v, is_causal=is_causal)
        return Empty.apply(q, k, v, is_causal)
