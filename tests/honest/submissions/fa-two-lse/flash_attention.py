"""FlashAttention-2 (the forward also keeps the base-2 logsumexp its exp2 backward wants): Triton forward (exp2, log2(e)-folded scale, L stored in natural log) and a
Triton backward of three kernels (preprocess: Delta and base-2 L; dK/dV over query blocks; dQ
over key blocks). Uses the newer autograd.Function API: forward without ctx + setup_context."""
from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _fwd_kernel(Q, K, V, O, L, L2, sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd,
                sob, soh, son, sod, H, NQ, NK, qk_scale,
                HEAD_D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_D)
    qb = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    kb = K + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    vb = V + b.to(tl.int64) * svb + h.to(tl.int64) * svh
    q = tl.load(qb + offs_m[:, None] * sqn + offs_d[None, :] * sqd, mask=offs_m[:, None] < NQ, other=0.0)
    m_i = tl.full((BM,), float("-inf"), tl.float32)
    l_i = tl.zeros((BM,), tl.float32)
    acc = tl.zeros((BM, HEAD_D), tl.float32)
    hi = NK
    if CAUSAL:
        hi = tl.minimum(NK, (pid_m + 1) * BM)
    for start in range(0, hi, BN):
        kn = start + offs_n
        k = tl.load(kb + kn[:, None] * skn + offs_d[None, :] * skd, mask=kn[:, None] < NK, other=0.0)
        v = tl.load(vb + kn[:, None] * svn + offs_d[None, :] * svd, mask=kn[:, None] < NK, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        valid = kn[None, :] < NK
        if CAUSAL:
            valid = valid & (kn[None, :] <= offs_m[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    o = acc / l_i[:, None]
    tl.store(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh + offs_m[:, None] * son + offs_d[None, :] * sod,
             o.to(O.dtype.element_ty), mask=offs_m[:, None] < NQ)
    lse2 = m_i + tl.log2(l_i)
    tl.store(L2 + bh.to(tl.int64) * NQ + offs_m, lse2, mask=offs_m < NQ)
    tl.store(L + bh.to(tl.int64) * NQ + offs_m, lse2 * 0.6931471805599453, mask=offs_m < NQ)


@triton.jit
def _bwd_preprocess(O, DO, L, DELTA, L2, sob, soh, son, sod, sdb, sdh, sdn, sdd, H, NQ,
                    HEAD_D: tl.constexpr, BM: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, HEAD_D)
    rmask = offs_m < NQ
    o = tl.load(O + b * sob + h * soh + offs_m[:, None] * son + offs_d[None, :] * sod, mask=rmask[:, None], other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :] * sdd, mask=rmask[:, None], other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(DELTA + bh * NQ + offs_m, delta, mask=rmask)
    lse = tl.load(L + bh * NQ + offs_m, mask=rmask, other=0.0)
    tl.store(L2 + bh * NQ + offs_m, lse * 1.4426950408889634, mask=rmask)


@triton.jit
def _bwd_dkdv(Q, K, V, DO, L2, DELTA, DK, DV,
              sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
              sdkb, sdkh, sdkn, sdkd, sdvb, sdvh, sdvn, sdvd, H, NQ, NK, sm_scale, qk_scale,
              HEAD_D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    pid_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_d = tl.arange(0, HEAD_D)
    nmask = offs_n < NK
    k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=nmask[:, None], other=0.0)
    v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=nmask[:, None], other=0.0)
    dk = tl.zeros((BN, HEAD_D), tl.float32)
    dv = tl.zeros((BN, HEAD_D), tl.float32)
    lo = 0
    if CAUSAL:
        lo = (pid_n * BN // BM) * BM
    for start_m in range(lo, NQ, BM):
        offs_m = start_m + tl.arange(0, BM)
        mmask = offs_m < NQ
        q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd, mask=mmask[:, None], other=0.0)
        do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :] * sdd, mask=mmask[:, None], other=0.0)
        l2 = tl.load(L2 + bh * NQ + offs_m, mask=mmask, other=0.0)
        delta = tl.load(DELTA + bh * NQ + offs_m, mask=mmask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        valid = mmask[:, None] & nmask[None, :]
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(valid, tl.exp2(s - l2[:, None]), 0.0)
        dv += tl.dot(tl.trans(p.to(do.dtype)), do)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
    dk = dk * sm_scale
    tl.store(DK + b * sdkb + h * sdkh + offs_n[:, None] * sdkn + offs_d[None, :] * sdkd, dk.to(DK.dtype.element_ty), mask=nmask[:, None])
    tl.store(DV + b * sdvb + h * sdvh + offs_n[:, None] * sdvn + offs_d[None, :] * sdvd, dv.to(DV.dtype.element_ty), mask=nmask[:, None])


@triton.jit
def _bwd_dq(Q, K, V, DO, L2, DELTA, DQ,
            sqb, sqh, sqn, sqd, skb, skh, skn, skd, svb, svh, svn, svd, sdb, sdh, sdn, sdd,
            sdqb, sdqh, sdqn, sdqd, H, NQ, NK, sm_scale, qk_scale,
            HEAD_D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, HEAD_D)
    mmask = offs_m < NQ
    q = tl.load(Q + b * sqb + h * sqh + offs_m[:, None] * sqn + offs_d[None, :] * sqd, mask=mmask[:, None], other=0.0)
    do = tl.load(DO + b * sdb + h * sdh + offs_m[:, None] * sdn + offs_d[None, :] * sdd, mask=mmask[:, None], other=0.0)
    l2 = tl.load(L2 + bh * NQ + offs_m, mask=mmask, other=0.0)
    delta = tl.load(DELTA + bh * NQ + offs_m, mask=mmask, other=0.0)
    dq = tl.zeros((BM, HEAD_D), tl.float32)
    hi = NK
    if CAUSAL:
        hi = tl.minimum(NK, (pid_m + 1) * BM)
    for start_n in range(0, hi, BN):
        offs_n = start_n + tl.arange(0, BN)
        nmask = offs_n < NK
        k = tl.load(K + b * skb + h * skh + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=nmask[:, None], other=0.0)
        v = tl.load(V + b * svb + h * svh + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=nmask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        valid = mmask[:, None] & nmask[None, :]
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(valid, tl.exp2(s - l2[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    dq = dq * sm_scale
    tl.store(DQ + b * sdqb + h * sdqh + offs_m[:, None] * sdqn + offs_d[None, :] * sdqd, dq.to(DQ.dtype.element_ty), mask=mmask[:, None])


def _blocks(device: torch.device) -> tuple[int, int]:
    return (64, 64) if device.type == "cuda" else (16, 16)


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        o = torch.empty_like(q)
        lse = torch.empty((B, H, NQ), dtype=torch.float32, device=q.device)   # natural log: the spec's L
        lse2 = torch.empty_like(lse)                                          # base 2: what the exp2 backward uses
        BM, BN = _blocks(q.device)
        grid = (triton.cdiv(NQ, BM), B * H)
        _fwd_kernel[grid](q, k, v, o, lse, lse2, *q.stride(), *k.stride(), *v.stride(), *o.stride(), H, NQ, NK,
                          LOG2E / math.sqrt(D), HEAD_D=D, BM=BM, BN=BN, CAUSAL=bool(is_causal))
        ctx.save_for_backward(q, k, v, o, lse2, lse)
        ctx.is_causal = bool(is_causal)
        return o

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor):
        q, k, v, o, lse2, lse = ctx.saved_tensors
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        do = grad_out
        BM, BN = _blocks(q.device)
        delta = torch.empty((B, H, NQ), dtype=torch.float32, device=q.device)
        scratch = torch.empty_like(delta)
        _bwd_preprocess[(triton.cdiv(NQ, BM), B * H)](o, do, lse, delta, scratch, *o.stride(), *do.stride(), H, NQ,
                                                      HEAD_D=D, BM=BM)
        dq = torch.empty_like(q)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        sm_scale = 1.0 / math.sqrt(D)
        _bwd_dkdv[(triton.cdiv(NK, BN), B * H)](q, k, v, do, lse2, delta, dk, dv, *q.stride(), *k.stride(), *v.stride(),
                                                *do.stride(), *dk.stride(), *dv.stride(), H, NQ, NK, sm_scale,
                                                sm_scale * LOG2E, HEAD_D=D, BM=BM, BN=BN, CAUSAL=ctx.is_causal)
        _bwd_dq[(triton.cdiv(NQ, BM), B * H)](q, k, v, do, lse2, delta, dq, *q.stride(), *k.stride(), *v.stride(),
                                              *do.stride(), *dq.stride(), H, NQ, NK, sm_scale, sm_scale * LOG2E,
                                              HEAD_D=D, BM=BM, BN=BN, CAUSAL=ctx.is_causal)
        return dq, dk, dv, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    return FlashAttention2.apply(q, k, v, is_causal)
