"""FlashAttention-2 forward and backward, all in Triton.

Forward: one program per (query block, batch*head); the key loop is split in two phases with
tl.static_range: off-diagonal blocks (no causal mask needed) and the diagonal block (masked).
Backward: a Delta kernel, then a dK/dV kernel (one program per key block, loops over queries)
and a separate dQ kernel (one program per query block, loops over keys). No atomics.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(
    Q, K, V, O, L,
    sqb, sqh, sqm, sqd,
    skb, skh, skn, skd,
    svb, svh, svn, svd,
    sob, soh, som, sod,
    H, N_Q, N_K, sm_scale,
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    k_base = K + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    v_base = V + b.to(tl.int64) * svb + h.to(tl.int64) * svh

    q = tl.load(q_base + offs_m[:, None] * sqm + offs_d[None, :] * sqd,
                mask=offs_m[:, None] < N_Q, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    # phase 0: key blocks strictly left of this query block (or every block, not causal)
    # phase 1 (causal only): the diagonal block, where the mask j <= i is needed
    for phase in tl.static_range(2 if CAUSAL else 1):
        if CAUSAL:
            if phase == 0:
                lo = 0
                hi = tl.minimum(start_m * BLOCK_M, N_K)
            else:
                lo = start_m * BLOCK_M
                hi = tl.minimum((start_m + 1) * BLOCK_M, N_K)
        else:
            lo = 0
            hi = N_K
        for start_n in tl.range(lo, hi, BLOCK_N):
            cols = start_n + offs_n
            k = tl.load(k_base + cols[:, None] * skn + offs_d[None, :] * skd,
                        mask=cols[:, None] < N_K, other=0.0)
            v = tl.load(v_base + cols[:, None] * svn + offs_d[None, :] * svd,
                        mask=cols[:, None] < N_K, other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=PREC) * sm_scale
            valid = cols[None, :] < N_K
            if CAUSAL:
                if phase == 1:
                    valid = valid & (cols[None, :] <= offs_m[:, None])
            s = tl.where(valid, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, axis=1)
            acc = acc * alpha[:, None]
            acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PREC)
            m_i = m_new

    out = acc / l_i[:, None]
    o_base = O + b.to(tl.int64) * sob + h.to(tl.int64) * soh
    tl.store(o_base + offs_m[:, None] * som + offs_d[None, :] * sod,
             out.to(O.dtype.element_ty), mask=offs_m[:, None] < N_Q)
    tl.store(L + bh.to(tl.int64) * N_Q + offs_m, m_i + tl.log(l_i), mask=offs_m < N_Q)


@triton.jit
def _bwd_delta(O, DO, DELTA,
               sob, soh, som, sod, sdb, sdh, sdm, sdd,
               H, N_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    msk = offs_m[:, None] < N_Q
    o = tl.load(O + b.to(tl.int64) * sob + h.to(tl.int64) * soh
                + offs_m[:, None] * som + offs_d[None, :] * sod, mask=msk, other=0.0)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh
                 + offs_m[:, None] * sdm + offs_d[None, :] * sdd, mask=msk, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(DELTA + bh.to(tl.int64) * N_Q + offs_m, delta, mask=offs_m < N_Q)


@triton.jit
def _bwd_dkdv(
    Q, K, V, DO, L, DELTA, DK, DV,
    sqb, sqh, sqm, sqd,
    skb, skh, skn, skd,
    svb, svh, svn, svd,
    sdb, sdh, sdm, sdd,
    H, N_Q, N_K, sm_scale,
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
):
    start_n = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_n = start_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)

    q_base = Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
    do_base = DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh
    k_base = K + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    v_base = V + b.to(tl.int64) * svb + h.to(tl.int64) * svh

    kmask = offs_n[:, None] < N_K
    k = tl.load(k_base + offs_n[:, None] * skn + offs_d[None, :] * skd, mask=kmask, other=0.0)
    v = tl.load(v_base + offs_n[:, None] * svn + offs_d[None, :] * svd, mask=kmask, other=0.0)

    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)

    lo = 0
    if CAUSAL:
        lo = start_n * BLOCK_N  # queries before the first key of this block see none of it
    for start_m in tl.range(lo, N_Q, BLOCK_M):
        rows = start_m + offs_m
        rmask = rows < N_Q
        q = tl.load(q_base + rows[:, None] * sqm + offs_d[None, :] * sqd, mask=rmask[:, None], other=0.0)
        do = tl.load(do_base + rows[:, None] * sdm + offs_d[None, :] * sdd, mask=rmask[:, None], other=0.0)
        lse = tl.load(L + bh.to(tl.int64) * N_Q + rows, mask=rmask, other=0.0)
        delta = tl.load(DELTA + bh.to(tl.int64) * N_Q + rows, mask=rmask, other=0.0)
        # P^T, laid out (BLOCK_N, BLOCK_M)
        st = tl.dot(k, tl.trans(q), input_precision=PREC) * sm_scale
        valid = (offs_n[:, None] < N_K) & rmask[None, :]
        if CAUSAL:
            valid = valid & (offs_n[:, None] <= rows[None, :])
        pt = tl.where(valid, tl.exp(st - lse[None, :]), 0.0)
        dv = tl.dot(pt.to(do.dtype), do, dv, input_precision=PREC)
        dpt = tl.dot(v, tl.trans(do), input_precision=PREC)
        dst = pt * (dpt - delta[None, :])
        dk = tl.dot(dst.to(q.dtype), q, dk, input_precision=PREC)

    dk = dk * sm_scale
    dk_base = DK + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    dv_base = DV + b.to(tl.int64) * svb + h.to(tl.int64) * svh
    tl.store(dk_base + offs_n[:, None] * skn + offs_d[None, :] * skd, dk.to(DK.dtype.element_ty), mask=kmask)
    tl.store(dv_base + offs_n[:, None] * svn + offs_d[None, :] * svd, dv.to(DV.dtype.element_ty), mask=kmask)


@triton.jit
def _bwd_dq(
    Q, K, V, DO, L, DELTA, DQ,
    sqb, sqh, sqm, sqd,
    skb, skh, skn, skd,
    svb, svh, svn, svd,
    sdb, sdh, sdm, sdd,
    H, N_Q, N_K, sm_scale,
    CAUSAL: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PREC: tl.constexpr,
):
    start_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    rmask = offs_m < N_Q

    q = tl.load(Q + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
                + offs_m[:, None] * sqm + offs_d[None, :] * sqd, mask=rmask[:, None], other=0.0)
    do = tl.load(DO + b.to(tl.int64) * sdb + h.to(tl.int64) * sdh
                 + offs_m[:, None] * sdm + offs_d[None, :] * sdd, mask=rmask[:, None], other=0.0)
    lse = tl.load(L + bh.to(tl.int64) * N_Q + offs_m, mask=rmask, other=0.0)
    delta = tl.load(DELTA + bh.to(tl.int64) * N_Q + offs_m, mask=rmask, other=0.0)

    k_base = K + b.to(tl.int64) * skb + h.to(tl.int64) * skh
    v_base = V + b.to(tl.int64) * svb + h.to(tl.int64) * svh
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    hi = N_K
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_K)
    for start_n in tl.range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        cmask = cols < N_K
        k = tl.load(k_base + cols[:, None] * skn + offs_d[None, :] * skd, mask=cmask[:, None], other=0.0)
        v = tl.load(v_base + cols[:, None] * svn + offs_d[None, :] * svd, mask=cmask[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision=PREC) * sm_scale
        valid = rmask[:, None] & cmask[None, :]
        if CAUSAL:
            valid = valid & (cols[None, :] <= offs_m[:, None])
        p = tl.where(valid, tl.exp(s - lse[:, None]), 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PREC)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PREC)

    dq = dq * sm_scale
    tl.store(DQ + b.to(tl.int64) * sqb + h.to(tl.int64) * sqh
             + offs_m[:, None] * sqm + offs_d[None, :] * sqd, dq.to(DQ.dtype.element_ty), mask=rmask[:, None])


def _config(q: torch.Tensor) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages); small tiles under the interpreter."""
    if not q.is_cuda:
        return 16, 16, 4, 1
    d = q.shape[-1]
    if d <= 64:
        return 64, 64, 4, 3
    return 64, 64, 8, 2


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        assert D in (16, 32, 64, 128)
        BM, BN, warps, stages = _config(q)
        o = torch.empty_like(q)
        lse = torch.empty((B, H, NQ), device=q.device, dtype=torch.float32)
        scale = 1.0 / math.sqrt(D)
        prec = "ieee" if q.dtype == torch.float32 else "tf32"
        grid = (triton.cdiv(NQ, BM), B * H)
        _fwd_kernel[grid](
            q, k, v, o, lse,
            *q.stride(), *k.stride(), *v.stride(), *o.stride(),
            H, NQ, NK, scale,
            CAUSAL=bool(is_causal), HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN, PREC=prec,
            num_warps=warps, num_stages=stages,
        )
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = bool(is_causal)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, o, lse = ctx.saved_tensors
        B, H, NQ, D = q.shape
        NK = k.shape[2]
        BM, BN, warps, stages = _config(q)
        do = grad_out
        prec = "ieee" if q.dtype == torch.float32 else "tf32"
        delta = torch.empty_like(lse)
        _bwd_delta[(triton.cdiv(NQ, BM), B * H)](
            o, do, delta, *o.stride(), *do.stride(), H, NQ, HEAD_DIM=D, BLOCK_M=BM, num_warps=4,
        )
        # gradients laid out like their inputs (same strides), so one set of strides serves both
        dq = torch.empty_strided(q.shape, q.stride(), device=q.device, dtype=q.dtype)
        dk = torch.empty_strided(k.shape, k.stride(), device=k.device, dtype=k.dtype)
        dv = torch.empty_strided(v.shape, v.stride(), device=v.device, dtype=v.dtype)
        common = (*q.stride(), *k.stride(), *v.stride(), *do.stride(), H, NQ, NK, ctx.scale)
        _bwd_dkdv[(triton.cdiv(NK, BN), B * H)](
            q, k, v, do, lse, delta, dk, dv, *common,
            CAUSAL=ctx.is_causal, HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN, PREC=prec,
            num_warps=warps, num_stages=stages,
        )
        _bwd_dq[(triton.cdiv(NQ, BM), B * H)](
            q, k, v, do, lse, delta, dq, *common,
            CAUSAL=ctx.is_causal, HEAD_DIM=D, BLOCK_M=BM, BLOCK_N=BN, PREC=prec,
            num_warps=warps, num_stages=stages,
        )
        return dq, dk, dv, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    return FlashAttention2.apply(q, k, v, is_causal)
