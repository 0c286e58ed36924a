"""FlashAttention-2 with a Triton backward too.

forward: 1-D grid, program p -> (head, query block); exp2 with the softmax scale folded in.
backward (as in the FA-2 paper, algorithm 2): Delta = rowsum(dO * O) in a small kernel, then one
program per key block walks the query blocks that see it, keeps dK and dV in registers, and
adds its share of dQ into a float32 buffer with atomic adds.
"""

import math

import torch
import triton
import triton.language as tl

RCP_LN2 = 1.4426950408889634  # 1 / ln 2


@triton.jit
def _attn_fwd(Q, K, V, O, LSE, sqb, sqh, sqn, skb, skh, skn, svb, svh, svn,
              H, NQ, NK, scale2, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
              CAUSAL: tl.constexpr, PREC: tl.constexpr):
    pid = tl.program_id(0)
    q_blocks = tl.cdiv(NQ, BM)
    bh = pid // q_blocks
    qb = pid % q_blocks
    b = bh // H
    h = bh % H
    Q += b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    K += b.to(tl.int64) * skb + h.to(tl.int64) * skh
    V += b.to(tl.int64) * svb + h.to(tl.int64) * svh
    rm = qb * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q = tl.load(Q + rm[:, None] * sqn + rd[None, :], mask=rm[:, None] < NQ, other=0.0)
    mi = tl.full([BM], -float("inf"), tl.float32)
    li = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    stop = NK
    if CAUSAL:
        stop = tl.minimum(NK, qb * BM + BM)
    for n0 in range(0, stop, BN):
        rn = n0 + tl.arange(0, BN)
        k = tl.load(K + rn[:, None] * skn + rd[None, :], mask=rn[:, None] < NK, other=0.0)
        v = tl.load(V + rn[:, None] * svn + rd[None, :], mask=rn[:, None] < NK, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale2
        vis = rn[None, :] < NK
        if CAUSAL:
            vis = vis & (rn[None, :] <= rm[:, None])
        s = tl.where(vis, s, -float("inf"))
        mnew = tl.maximum(mi, tl.max(s, 1))
        p = tl.exp2(s - mnew[:, None])
        a = tl.exp2(mi - mnew)
        li = li * a + tl.sum(p, 1)
        acc = acc * a[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PREC)
        mi = mnew
    # O is allocated contiguous (B, H, NQ, D)
    tl.store(O + bh.to(tl.int64) * NQ * D + rm[:, None] * D + rd[None, :],
             (acc / li[:, None]).to(O.dtype.element_ty), mask=rm[:, None] < NQ)
    tl.store(LSE + bh.to(tl.int64) * NQ + rm, (mi + tl.log2(li)) / 1.4426950408889634, mask=rm < NQ)


@triton.jit
def _attn_bwd_delta(O, DO, DELTA, NQ, D: tl.constexpr, BM: tl.constexpr):
    bh = tl.program_id(1).to(tl.int64)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    offs = bh * NQ * D + rm[:, None] * D + rd[None, :]
    o = tl.load(O + offs, mask=rm[:, None] < NQ, other=0.0).to(tl.float32)
    do = tl.load(DO + offs, mask=rm[:, None] < NQ, other=0.0).to(tl.float32)
    tl.store(DELTA + bh * NQ + rm, tl.sum(o * do, 1), mask=rm < NQ)


@triton.jit
def _attn_bwd(Q, K, V, DO, LSE, DELTA, DQ, DK, DV, NQ, NK, scale,
              D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr,
              PREC: tl.constexpr):
    kb = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    # every tensor here is contiguous (B, H, N, D)
    Q += bh * NQ * D
    DO += bh * NQ * D
    DQ += bh * NQ * D
    K += bh * NK * D
    V += bh * NK * D
    DK += bh * NK * D
    DV += bh * NK * D
    LSE += bh * NQ
    DELTA += bh * NQ
    rn = kb * BN + tl.arange(0, BN)
    rd = tl.arange(0, D)
    kmask = rn[:, None] < NK
    k = tl.load(K + rn[:, None] * D + rd[None, :], mask=kmask, other=0.0)
    v = tl.load(V + rn[:, None] * D + rd[None, :], mask=kmask, other=0.0)
    dk = tl.zeros([BN, D], tl.float32)
    dv = tl.zeros([BN, D], tl.float32)
    first = 0
    if CAUSAL:
        first = (kb * BN) // BM * BM  # queries before this key block never see it
    for m0 in range(first, NQ, BM):
        rm = m0 + tl.arange(0, BM)
        qmask = rm[:, None] < NQ
        q = tl.load(Q + rm[:, None] * D + rd[None, :], mask=qmask, other=0.0)
        do = tl.load(DO + rm[:, None] * D + rd[None, :], mask=qmask, other=0.0)
        lse = tl.load(LSE + rm, mask=rm < NQ, other=0.0)
        delta = tl.load(DELTA + rm, mask=rm < NQ, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * scale
        vis = (rm[:, None] < NQ) & (rn[None, :] < NK)
        if CAUSAL:
            vis = vis & (rn[None, :] <= rm[:, None])
        p = tl.where(vis, tl.exp(s - lse[:, None]), 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PREC)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - delta[:, None]) * scale
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PREC)
        dq = tl.dot(ds.to(k.dtype), k, input_precision=PREC)
        tl.atomic_add(DQ + rm[:, None] * D + rd[None, :], dq, mask=qmask)
    tl.store(DK + rn[:, None] * D + rd[None, :], dk.to(DK.dtype.element_ty), mask=kmask)
    tl.store(DV + rn[:, None] * D + rd[None, :], dv.to(DV.dtype.element_ty), mask=kmask)


def _sizes(t):
    if not t.is_cuda:
        return 16, 16, 2
    if t.dtype == torch.float32 or t.shape[-1] == 128:
        return 64, 32, 4
    return 64, 64, 4


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        bm, bn, warps = _sizes(q)
        prec = "ieee" if q.dtype == torch.float32 else "tf32"
        o = torch.empty((B, H, NQ, D), device=q.device, dtype=q.dtype)
        lse = torch.empty((B, H, NQ), device=q.device, dtype=torch.float32)
        grid = (B * H * triton.cdiv(NQ, bm),)
        _attn_fwd[grid](q, k, v, o, lse, q.stride(0), q.stride(1), q.stride(2),
                        k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
                        H, NQ, NK, RCP_LN2 / math.sqrt(D), D=D, BM=bm, BN=bn, CAUSAL=is_causal,
                        PREC=prec, num_warps=warps)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        # the backward kernels index (B, H, N, D) directly
        q, k, v, do = q.contiguous(), k.contiguous(), v.contiguous(), do.contiguous()
        bm, bn, warps = _sizes(q)
        prec = "ieee" if q.dtype == torch.float32 else "tf32"
        delta = torch.empty_like(lse)
        _attn_bwd_delta[(triton.cdiv(NQ, bm), B * H)](o, do, delta, NQ, D=D, BM=bm, num_warps=warps)
        dq32 = torch.zeros((B, H, NQ, D), device=q.device, dtype=torch.float32)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        _attn_bwd[(triton.cdiv(NK, bn), B * H)](q, k, v, do, lse, delta, dq32, dk, dv, NQ, NK,
                                                1.0 / math.sqrt(D), D=D, BM=bm, BN=bn,
                                                CAUSAL=ctx.is_causal, PREC=prec, num_warps=warps)
        return dq32.to(q.dtype), dk, dv, None


def flash_attention(q, k, v, is_causal=False):
    return FlashAttention2.apply(q, k, v, is_causal)
