"""A correct student FlashAttention-2: Triton forward, PyTorch backward recomputing P from L."""

import math

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd(q_ptr, k_ptr, v_ptr, o_ptr, l_ptr,
         sqb, sqh, sqn, skb, skh, skn, svb, svh, svn, sob, soh, son,
         H, NQ, NK, scale,
         CAUSAL: tl.constexpr, D: tl.constexpr, BQ: tl.constexpr, BK: tl.constexpr):
    qt = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    rq = qt * BQ + tl.arange(0, BQ)
    rd = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + h * sqh + rq[:, None] * sqn + rd[None, :], mask=rq[:, None] < NQ, other=0.0)
    m = tl.full([BQ], float("-inf"), tl.float32)
    l = tl.zeros([BQ], tl.float32)
    acc = tl.zeros([BQ, D], tl.float32)
    for start in range(0, NK, BK):
        rk = start + tl.arange(0, BK)
        k = tl.load(k_ptr + b * skb + h * skh + rk[:, None] * skn + rd[None, :], mask=rk[:, None] < NK, other=0.0)
        v = tl.load(v_ptr + b * svb + h * svh + rk[:, None] * svn + rd[None, :], mask=rk[:, None] < NK, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        valid = rk[None, :] < NK
        if CAUSAL:
            valid = valid & (rk[None, :] <= rq[:, None])
        s = tl.where(valid, s, float("-inf"))
        new_m = tl.maximum(m, tl.max(s, 1))
        p = tl.exp(s - new_m[:, None])
        alpha = tl.exp(m - new_m)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = new_m
    tl.store(o_ptr + b * sob + h * soh + rq[:, None] * son + rd[None, :], (acc / l[:, None]).to(o_ptr.dtype.element_ty), mask=rq[:, None] < NQ)
    tl.store(l_ptr + bh * NQ + rq, m + tl.log(l), mask=rq < NQ)


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        o = torch.empty((B, H, NQ, D), dtype=q.dtype, device=q.device)
        lse = torch.empty((B, H, NQ), dtype=torch.float32, device=q.device)
        grid = (triton.cdiv(NQ, 32), B * H)
        _fwd[grid](q, k, v, o, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
                   H, NQ, NK, 1.0 / math.sqrt(D), CAUSAL=is_causal, D=D, BQ=32, BK=32)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, o, lse = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[-1])
        qf, kf, vf, of, do = (t.float() for t in (q, k, v, o, grad_out))
        # Two N x N float32 matrices at a time, each overwritten in place: at N = 16384 with 16
        # heads each is 16 GiB, and keeping S, P, dP and dS apart (80 GiB) does not fit an 80 GB GPU.
        s = qf @ kf.transpose(-1, -2)
        s.mul_(scale)
        if ctx.is_causal:
            hidden = torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1)
            s.masked_fill_(hidden, float("-inf"))
        p = s.sub_(lse.unsqueeze(-1)).exp_()  # P = exp(S - L), in S's memory
        dv = p.transpose(-1, -2) @ do
        dp = do @ vf.transpose(-1, -2)
        delta = (do * of).sum(-1, keepdim=True)
        ds = dp.sub_(delta).mul_(p)  # dS = P * (dP - delta), in dP's memory
        dq = ds @ kf * scale
        dk = ds.transpose(-1, -2) @ qf * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def flash_attention(q, k, v, is_causal=False):
    return FlashAttention2.apply(q, k, v, is_causal)
