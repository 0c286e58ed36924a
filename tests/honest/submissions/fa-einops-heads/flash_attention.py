"""FlashAttention-2 with einops doing the shape work around a 3-D Triton kernel.

I wrote the kernel for (batch, seq, d) first, so the 4-D API is handled outside it: einops
folds (B, H) into one batch axis going in (a copy when q, k, v are strided views, which keeps
the kernel's pointer math simple: row stride D, head stride N * D) and unfolds the output and
the logsumexp coming back. The kernel uses plain pointer arithmetic with masks (no block
pointers), so the same code runs on any Triton version.

The backward is eager PyTorch in einops notation, recomputing P from the saved L.
"""

import math

import einops
import torch
import triton
import triton.language as tl


@triton.jit
def _attention_rows(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, n_q, n_k, scale,
                    HEAD_DIM: tl.constexpr, BLOCK_Q: tl.constexpr, BLOCK_K: tl.constexpr,
                    CAUSAL: tl.constexpr):
    tile = tl.program_id(0)
    bh = tl.program_id(1)
    rows = tile * BLOCK_Q + tl.arange(0, BLOCK_Q)
    cols = tl.arange(0, HEAD_DIM)
    row_ok = rows < n_q
    q = tl.load(q_ptr + bh * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :],
                mask=row_ok[:, None], other=0.0)

    running_max = tl.full((BLOCK_Q,), float("-inf"), tl.float32)
    running_sum = tl.zeros((BLOCK_Q,), tl.float32)
    out = tl.zeros((BLOCK_Q, HEAD_DIM), tl.float32)
    stop = n_k
    if CAUSAL:
        stop = tl.minimum(n_k, (tile + 1) * BLOCK_Q)
    for start in range(0, stop, BLOCK_K):
        keys = start + tl.arange(0, BLOCK_K)
        key_ok = keys < n_k
        offsets = bh * n_k * HEAD_DIM + keys[:, None] * HEAD_DIM + cols[None, :]
        k = tl.load(k_ptr + offsets, mask=key_ok[:, None], other=0.0)
        v = tl.load(v_ptr + offsets, mask=key_ok[:, None], other=0.0)
        scores = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        visible = key_ok[None, :]
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None])
        scores = tl.where(visible, scores, float("-inf"))
        new_max = tl.maximum(running_max, tl.max(scores, 1))
        p = tl.exp(scores - new_max[:, None])
        rescale = tl.exp(running_max - new_max)
        running_sum = running_sum * rescale + tl.sum(p, 1)
        out = out * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        running_max = new_max

    out = out / running_sum[:, None]
    tl.store(o_ptr + bh * n_q * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :],
             out.to(o_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(lse_ptr + bh * n_q + rows, running_max + tl.log(running_sum), mask=row_ok)


class FlashAttention2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        b, h, n_q, d = q.shape
        n_k = k.shape[2]
        q3, k3, v3 = (einops.rearrange(t, "b h n d -> (b h) n d").contiguous() for t in (q, k, v))
        o3 = torch.empty_like(q3)
        lse3 = torch.empty((b * h, n_q), device=q.device, dtype=torch.float32)
        block = 64 if q.is_cuda else 16
        grid = (triton.cdiv(n_q, block), b * h)
        _attention_rows[grid](q3, k3, v3, o3, lse3, n_q, n_k, 1.0 / math.sqrt(d),
                              HEAD_DIM=d, BLOCK_Q=block, BLOCK_K=block, CAUSAL=is_causal)
        o = einops.rearrange(o3, "(b h) n d -> b h n d", b=b)
        lse = einops.rearrange(lse3, "(b h) n -> b h n", b=b)
        ctx.causal = is_causal
        ctx.save_for_backward(q, k, v, o, lse)
        return o

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        scale = q.shape[-1] ** -0.5
        qf, kf, vf, of, gf = (x.to(torch.float32) for x in (q, k, v, out, d_out))
        scores = einops.einsum(qf, kf, "b h i d, b h j d -> b h i j") * scale
        if ctx.causal:
            i = torch.arange(q.shape[2], device=q.device)
            j = torch.arange(k.shape[2], device=q.device)
            later = einops.rearrange(j, "j -> 1 j") > einops.rearrange(i, "i -> i 1")
            scores = scores.masked_fill(later, float("-inf"))
        p = torch.exp(scores - einops.rearrange(lse, "b h i -> b h i 1"))
        dv = einops.einsum(p, gf, "b h i j, b h i d -> b h j d")
        dp = einops.einsum(gf, vf, "b h i d, b h j d -> b h i j")
        delta = einops.reduce(gf * of, "b h i d -> b h i 1", "sum")
        ds = p * (dp - delta) * scale
        dq = einops.einsum(ds, kf, "b h i j, b h j d -> b h i d")
        dk = einops.einsum(ds, qf, "b h i j, b h i d -> b h j d")
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None


def flash_attention(q, k, v, is_causal=False):
    return FlashAttention2.apply(q, k, v, is_causal)
