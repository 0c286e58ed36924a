"""FlashAttention-2: Triton forward (exp2, folded scale, strides), torch.compile'd backward.

The backward is the textbook recompute-from-L in PyTorch, wrapped in torch.compile so that the
elementwise parts (exp, the Delta subtraction, masking) get fused instead of running as separate
kernels. The forward handles any strides, so the (B, N, H, D) -> (B, H, N, D) view needs no copy.
"""

import math

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr,
                sq_b, sq_h, sq_n, sq_d, sk_b, sk_h, sk_n, sk_d,
                sv_b, sv_h, sv_n, sv_d, so_b, so_h, so_n, so_d,
                num_heads, seq_q, seq_k, qk_scale_log2,
                D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                IS_CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    # causal: the last query blocks have the most keys, start them first
    n_qblocks = tl.cdiv(seq_q, BLOCK_M)
    if IS_CAUSAL:
        qblk = n_qblocks - 1 - tl.program_id(0)
    else:
        qblk = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // num_heads
    h = pid_bh % num_heads
    q_ptr += b.to(tl.int64) * sq_b + h.to(tl.int64) * sq_h
    k_ptr += b.to(tl.int64) * sk_b + h.to(tl.int64) * sk_h
    v_ptr += b.to(tl.int64) * sv_b + h.to(tl.int64) * sv_h
    o_ptr += b.to(tl.int64) * so_b + h.to(tl.int64) * so_h

    offs_m = qblk * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    row_ok = offs_m < seq_q
    q = tl.load(q_ptr + offs_m[:, None] * sq_n + offs_d[None, :] * sq_d, mask=row_ok[:, None], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)   # base-2 running max
    l_i = tl.full([BLOCK_M], 0.0, tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = seq_k
    if IS_CAUSAL:
        hi = tl.minimum(seq_k, (qblk + 1) * BLOCK_M)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        col_ok = cols < seq_k
        kT = tl.load(k_ptr + cols[None, :] * sk_n + offs_d[:, None] * sk_d, mask=col_ok[None, :], other=0.0)
        s = tl.dot(q, kT, input_precision=PRECISION) * qk_scale_log2
        keep = col_ok[None, :]
        if IS_CAUSAL:
            keep = keep & (cols[None, :] <= offs_m[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = alpha * l_i + tl.sum(p, 1)
        v = tl.load(v_ptr + cols[:, None] * sv_n + offs_d[None, :] * sv_d, mask=col_ok[:, None], other=0.0)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=PRECISION)
        m_i = m_new

    o = acc / l_i[:, None]
    tl.store(o_ptr + offs_m[:, None] * so_n + offs_d[None, :] * so_d, o.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    # back to natural log for L
    lse = (m_i + tl.math.log2(l_i)) * 0.6931471805599453
    tl.store(lse_ptr + pid_bh.to(tl.int64) * seq_q + offs_m, lse, mask=row_ok)


@torch.compile(fullgraph=True)
def _attn_backward(q, k, v, o, do, lse, scale: float, causal: bool):
    qf, kf, vf, of, dof = q.float(), k.float(), v.float(), o.float(), do.float()
    s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if causal:
        nq, nk = s.shape[-2], s.shape[-1]
        rows = torch.arange(nq, device=s.device)[:, None]
        cols = torch.arange(nk, device=s.device)[None, :]
        s = torch.where(cols <= rows, s, float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dv = torch.matmul(p.transpose(-1, -2), dof)
    dp = torch.matmul(dof, vf.transpose(-1, -2))
    delta = (dof * of).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    dq = torch.matmul(ds, kf) * scale
    dk = torch.matmul(ds.transpose(-1, -2), qf) * scale
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


def _tiles(q):
    if not q.is_cuda:
        return 32, 16, 4
    if q.dtype == torch.float32:  # twice the bytes and three products per dot
        return 64, 32, 4
    if q.shape[-1] <= 64:
        return 128, 64, 8
    return 64, 64, 4


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        batch, heads, seq_q, d = q.shape
        seq_k = k.shape[2]
        o = torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device)
        lse = torch.empty((batch, heads, seq_q), dtype=torch.float32, device=q.device)
        block_m, block_n, warps = _tiles(q)
        grid = (triton.cdiv(seq_q, block_m), batch * heads)
        _fwd_kernel[grid](q, k, v, o, lse, *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                          heads, seq_q, seq_k, LOG2E / math.sqrt(d),
                          D=d, BLOCK_M=block_m, BLOCK_N=block_n, IS_CAUSAL=is_causal,
                          # plain tf32 cost me the fp32 tolerance on L; 3 tf32 passes is enough
                          PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32",
                          num_warps=warps, num_stages=2)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal = is_causal
        return o

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, o, lse = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[-1])
        batch, heads, seq_q, d = q.shape
        seq_k = k.shape[2]
        flat = [t.reshape(batch * heads, *t.shape[2:]) for t in (q, k, v, o, grad_out, lse)]
        # the float32 score matrix of the 16k benchmark is 17 GB per head group: a few heads at a time
        step = max(1, (1 << 28) // (seq_q * seq_k))
        grads = [torch.empty_like(t) for t in flat[:3]]
        for s in range(0, batch * heads, step):
            parts = _attn_backward(*(t[s:s + step] for t in flat), scale, ctx.causal)
            for g, part in zip(grads, parts):
                g[s:s + step] = part
        return grads[0].reshape(q.shape), grads[1].reshape(k.shape), grads[2].reshape(v.shape), None


def flash_attention(q, k, v, is_causal=False):
    return FlashAttention2.apply(q, k, v, is_causal)
