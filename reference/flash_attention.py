"""FlashAttention-2 in Triton, forward and backward: reference solution.

``flash_attention(q, k, v, is_causal=False)`` returns ``softmax(q k^T / sqrt(D)) v`` for q of
shape (B, H, Nq, D) and k, v of shape (B, H, Nk, D), and is differentiable in q, k and v.

Why not the obvious three lines. ``softmax(q @ k.T * scale) @ v`` materialises the Nq x Nk score
matrix S and the probabilities P in device memory: at N = 16384 that is 1 GiB *per head* in
float32, written and read back several times. Attention is then memory-bound although its two
matrix products are big enough to keep the tensor cores busy. FlashAttention never stores S or
P: it computes them tile by tile in on-chip memory and only ever writes O (and one float per
row, the logsumexp L).

Forward: tiles and online softmax. A program owns a BLOCK_M x D tile of queries, kept on chip
for its whole life, and walks over the keys and values in BLOCK_N x D tiles. For each key tile it
computes the scores ``S = Q K^T`` (BLOCK_M x BLOCK_N, float32) and folds them into three running
quantities per query row: the largest score so far ``m``, the softmax denominator ``l`` measured
relative to ``m``, and the unnormalised output ``acc``. When a tile raises the maximum from
``m`` to ``m'``, everything accumulated so far was scaled by ``exp(-m)`` and must now be scaled
by ``exp(-m')``, so it is multiplied by ``alpha = exp(m - m')`` (the online-softmax recurrence):

    m'   = max(m, rowmax(S))
    P    = exp(S - m')
    l'   = alpha * l + rowsum(P)
    acc' = alpha * acc + P V

At the end ``O = acc / l`` and ``L = m + log(l)``. Each key and value is read once per query tile
instead of the whole of S being written and read back, and the only arithmetic outside the two
matrix products is one exp per score.

exp2 with the scale folded in. The GPU's special-function unit computes 2^x; ``exp(x)`` costs an
extra multiply by log2(e). Softmax is invariant under the choice of base as long as it is applied
consistently, so the kernel works in base 2 throughout: it multiplies the raw score by
``qk_scale = log2(e) / sqrt(D)`` (one fused multiply-add together with the subtraction of the
running maximum) and calls ``exp2``. The running maximum and L are kept in base-2 units inside
the kernel; L is converted to the natural logarithm only when it is stored.

Causal masking, top-left aligned: query i sees key j only when j <= i. A query tile rows
[m0, m0 + BLOCK_M) never sees keys at or beyond m0 + BLOCK_M, so the loop simply stops there
(early exit): for Nq = Nk this skips almost half of the work. Of the tiles it does visit, those
wholly left of the diagonal (every key index <= every query index) need no mask at all, so the
key loop is split in two: a fast loop over the full tiles with no masking, and a masked loop
over the one or two tiles that straddle the diagonal (and over a ragged last tile when Nk is not
a multiple of BLOCK_N). Every row always sees key 0, so no row is ever all-masked and the
recurrence never meets ``exp(-inf - (-inf))``.

Backward: recompute instead of store. The gradients need P, which the forward pass threw away.
Storing it would bring back the N^2 memory; instead P is recomputed tile by tile from the saved
L, exactly and with a single exp2: ``P = exp(S / sqrt(D) - L)``. With
``dP = dO V^T`` and ``Delta_i = rowsum(dO_i * O_i)`` (which equals ``rowsum(P_i * dP_i)``):

    dV = P^T dO,    dS = P * (dP - Delta),    dQ = dS K / sqrt(D),    dK = dS^T Q / sqrt(D)

Three kernels: ``_attn_bwd_preprocess_kernel`` computes Delta (one read of O and dO);
``_attn_bwd_dkdv_kernel`` gives each program a key tile and loops over the query tiles that see
it, accumulating dK and dV in registers; ``_attn_bwd_dq_kernel`` gives each program a query tile
and loops over key tiles, accumulating dQ. S and dP are computed twice (once in each kernel) --
seven matrix products instead of five -- but no program ever writes to memory another program
writes, so there are no atomics and the gradients are deterministic, bit for bit, from run to
run. Both loops use the same causal early exit and the same split into unmasked and masked tiles
as the forward pass.

Loading tiles. Q, K, V, dO may have any strides (a (B, N, H, D) tensor transposed to
(B, H, N, D) is the common case); the kernels take every stride as an argument. The tiles a
program streams through its loop (K and V in the forward and dQ kernels, Q and dO in the dK/dV
kernel) can come in two ways, and the autotuner picks per size class: masked pointer loads,
which Triton pipelines with asynchronous copies, or, on Hopper when the strides are 16-byte
aligned with a unit stride along D, the Tensor Memory Accelerator (TMA) through a per-head tensor
descriptor: one instruction copies a whole tile and fills rows past the end of the sequence with
zeros, with no address arithmetic or masks in the warps. Building the descriptors costs each
program a fixed setup, which long sequences repay and short ones (few tiles per program) do not.
Tiles a program reads only once use plain loads. Triton's CPU interpreter runs both paths.

Precision: float16 and bfloat16 inputs go through the tensor cores with float32 accumulation;
the softmax statistics, L, Delta and all accumulators are float32; P and dS are rounded to the
input dtype just before they enter a matrix product, as in FlashAttention-2. float32 inputs use
``input_precision="tf32x3"`` (three TF32 products, accurate to about float32 rounding).
"""
import functools
import math

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * log2(e))
_SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)
_SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


# ----------------------------------------------------------------------------------------------
# Tile loading: through a TMA descriptor, or masked pointer loads.
@triton.jit
def _tile_source(base, n_rows, stride_row, BLOCK: tl.constexpr, HEAD_DIM: tl.constexpr,
                 USE_TMA: tl.constexpr):
    """What ``_load_tile`` reads from: a TMA descriptor of the (n_rows, HEAD_DIM) matrix at
    ``base`` (rows past n_rows read as zeros), or just the base pointer."""
    if USE_TMA:
        src = tl.make_tensor_descriptor(base, shape=[n_rows, HEAD_DIM], strides=[stride_row, 1],
                                        block_shape=[BLOCK, HEAD_DIM])
    else:
        src = base
    return src


@triton.jit
def _load_tile(src, row0, n_rows, stride_row, stride_col, BLOCK: tl.constexpr,
               HEAD_DIM: tl.constexpr, USE_TMA: tl.constexpr, CHECK_ROWS: tl.constexpr):
    """Rows [row0, row0 + BLOCK) of a (n_rows, HEAD_DIM) matrix; rows >= n_rows read as 0.

    CHECK_ROWS=False promises that the whole tile is in range, so the pointer path needs no mask.
    """
    if USE_TMA:
        tile = src.load([row0, 0])
    else:
        rows = tl.arange(0, BLOCK)
        ptrs = (src + tl.cast(row0, tl.int64) * stride_row
                + rows[:, None] * stride_row + tl.arange(0, HEAD_DIM)[None, :] * stride_col)
        if CHECK_ROWS:
            tile = tl.load(ptrs, mask=(row0 + rows)[:, None] < n_rows, other=0.0)
        else:
            tile = tl.load(ptrs)
    return tile


@triton.jit
def _store_tile(base, tile, row0, n_rows, stride_row, stride_col, BLOCK: tl.constexpr,
                HEAD_DIM: tl.constexpr):
    """Store a (BLOCK, HEAD_DIM) tile to rows [row0, row0 + BLOCK), dropping rows >= n_rows."""
    rows = row0 + tl.arange(0, BLOCK)
    ptrs = base + rows.to(tl.int64)[:, None] * stride_row + tl.arange(0, HEAD_DIM)[None, :] * stride_col
    tl.store(ptrs, tile.to(base.dtype.element_ty), mask=rows[:, None] < n_rows)


@triton.jit
def _head_offset(pid_bh, H, stride_b, stride_h):
    """Element offset of head (b, h) = divmod(pid_bh, H), in 64 bits so huge tensors can't wrap."""
    return (pid_bh // H).to(tl.int64) * stride_b + (pid_bh % H).to(tl.int64) * stride_h


@triton.jit
def _causal_full_tiles_end(m0, n_keys, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """End of the key tiles that every query of the tile starting at row m0 sees completely.

    A key tile [n0, n0 + BLOCK_N) needs no mask when it lies inside the keys (n0 + BLOCK_N <= Nk)
    and, if causal, left of the diagonal for the tile's first query (n0 + BLOCK_N - 1 <= m0).
    """
    if IS_CAUSAL:
        end = tl.minimum(m0 + 1, n_keys) // BLOCK_N * BLOCK_N
    else:
        end = n_keys // BLOCK_N * BLOCK_N
    return end


@triton.jit
def _causal_keys_end(m0, n_keys, BLOCK_M: tl.constexpr, IS_CAUSAL: tl.constexpr):
    """One past the last key any query in rows [m0, m0 + BLOCK_M) may see (the early exit)."""
    if IS_CAUSAL:
        end = tl.minimum(m0 + BLOCK_M, n_keys)
    else:
        end = n_keys
    return end


# ----------------------------------------------------------------------------------------------
# Forward
@triton.jit
def _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, lo, hi, offs_m, N_K, qk_scale,
                    stride_kn, stride_kd, stride_vn, stride_vd,
                    HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
                    MASKED: tl.constexpr, USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    """Fold key/value tiles [lo, hi) into the running (acc, l, m) of one query tile.

    With MASKED=False every score of every tile is visible: no mask is built, and the scale is
    applied to the row maximum before the subtraction so that ``s * qk_scale - m`` is one FMA.
    """
    for n0 in range(lo, hi, BLOCK_N):
        k = _load_tile(k_src, n0, N_K, stride_kn, stride_kd, BLOCK_N, HEAD_DIM, USE_TMA, MASKED)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        if MASKED:
            offs_n = n0 + tl.arange(0, BLOCK_N)
            visible = offs_n[None, :] < N_K
            if IS_CAUSAL:
                visible = visible & (offs_n[None, :] <= offs_m[:, None])
            s = tl.where(visible, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _load_tile(v_src, n0, N_K, stride_vn, stride_vd, BLOCK_N, HEAD_DIM, USE_TMA, MASKED)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd_kernel(Q, K, V, O, L,
                     stride_qb, stride_qh, stride_qm, stride_qd,
                     stride_kb, stride_kh, stride_kn, stride_kd,
                     stride_vb, stride_vh, stride_vn, stride_vd,
                     stride_ob, stride_oh, stride_om, stride_od,
                     H, N_Q, N_K, qk_scale, SEQ_BUCKET,
                     HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, TMA_OK: tl.constexpr,
                     PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     USE_TMA: tl.constexpr):
    """One program: one BLOCK_M-row query tile of one head. Writes O and L = logsumexp (base e).

    Grid: (query tiles, B * H). Query tiles are taken last-first: under a causal mask the last
    tiles have the most keys to visit, and starting them first keeps the tail of the launch
    short. The autotuner picks the tiles and whether K and V come through TMA (USE_TMA); it may
    pick TMA only where the inputs allow it (TMA_OK). SEQ_BUCKET is unused by the kernel: with
    TMA_OK it is part of the autotuning key (the next power of two of the longer sequence), so
    that ragged lengths reuse the tuning of their size class.
    """
    tl.static_assert(TMA_OK or not USE_TMA)
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    pid_bh = tl.program_id(1)
    m0 = pid_m * BLOCK_M
    k_src = _tile_source(K + _head_offset(pid_bh, H, stride_kb, stride_kh), N_K, stride_kn,
                         BLOCK_N, HEAD_DIM, USE_TMA)
    v_src = _tile_source(V + _head_offset(pid_bh, H, stride_vb, stride_vh), N_K, stride_vn,
                         BLOCK_N, HEAD_DIM, USE_TMA)

    # Q is read once per program: a plain load is cheaper than setting up a descriptor for it.
    q = _load_tile(Q + _head_offset(pid_bh, H, stride_qb, stride_qh), m0, N_Q, stride_qm,
                   stride_qd, BLOCK_M, HEAD_DIM, False, True)
    offs_m = m0 + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    full_end = _causal_full_tiles_end(m0, N_K, BLOCK_N, IS_CAUSAL)
    keys_end = _causal_keys_end(m0, N_K, BLOCK_M, IS_CAUSAL)
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, 0, full_end, offs_m, N_K,
                                    qk_scale, stride_kn, stride_kd, stride_vn, stride_vd,
                                    HEAD_DIM, BLOCK_N, IS_CAUSAL, False, USE_TMA, PRECISION)
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, k_src, v_src, full_end, keys_end, offs_m,
                                    N_K, qk_scale, stride_kn, stride_kd, stride_vn, stride_vd,
                                    HEAD_DIM, BLOCK_N, IS_CAUSAL, True, USE_TMA, PRECISION)

    o = acc / l_i[:, None]
    _store_tile(O + _head_offset(pid_bh, H, stride_ob, stride_oh), o, m0, N_Q, stride_om,
                stride_od, BLOCK_M, HEAD_DIM)
    lse = (m_i + tl.log2(l_i)) * 0.6931471805599453  # base-2 units -> natural log
    tl.store(L + pid_bh.to(tl.int64) * N_Q + offs_m, lse, mask=offs_m < N_Q)


# ----------------------------------------------------------------------------------------------
# Backward
@triton.jit
def _attn_bwd_preprocess_kernel(O, DO, Delta,
                                stride_ob, stride_oh, stride_om, stride_od,
                                stride_dob, stride_doh, stride_dom, stride_dod,
                                H, N_Q, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    """Delta_i = sum_d dO[i, d] * O[i, d] in float32, for BLOCK_M rows of one head."""
    pid_bh = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    in_range = rows[:, None] < N_Q
    o = tl.load(O + _head_offset(pid_bh, H, stride_ob, stride_oh)
                + rows[:, None] * stride_om + cols[None, :] * stride_od, mask=in_range, other=0.0)
    do = tl.load(DO + _head_offset(pid_bh, H, stride_dob, stride_doh)
                 + rows[:, None] * stride_dom + cols[None, :] * stride_dod, mask=in_range, other=0.0)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1)
    tl.store(Delta + pid_bh.to(tl.int64) * N_Q + rows, delta, mask=rows < N_Q)


@triton.jit
def _attn_bwd_dkdv_inner(dk, dv, k, v, q_src, do_src, L, Delta, lo, hi, offs_n, N_Q, qk_scale,
                         stride_qm, stride_qd, stride_dom, stride_dod,
                         HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, IS_CAUSAL: tl.constexpr,
                         MASKED: tl.constexpr, USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    """Accumulate into dK, dV (BLOCK_N x D) the query tiles [lo, hi), in transposed form.

    Computing S^T = K Q^T (rather than S) keeps the key index on the rows, so P^T and dS^T come
    out in the layout that ``dV += P^T dO`` and ``dK += dS^T Q`` consume, with no transposes of
    register tiles. Rows past Nq load as zeros and their L as +inf, so their P is exactly 0.
    """
    for m0 in range(lo, hi, BLOCK_M):
        offs_m = m0 + tl.arange(0, BLOCK_M)
        q = _load_tile(q_src, m0, N_Q, stride_qm, stride_qd, BLOCK_M, HEAD_DIM, USE_TMA, MASKED)
        if MASKED:
            lse = tl.load(L + offs_m, mask=offs_m < N_Q, other=float("inf"))
        else:
            lse = tl.load(L + offs_m)
        s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION)
        p_t = tl.exp2(s_t * qk_scale - lse[None, :] * 1.4426950408889634)
        if MASKED and IS_CAUSAL:
            p_t = tl.where(offs_n[:, None] <= offs_m[None, :], p_t, 0.0)
        do = _load_tile(do_src, m0, N_Q, stride_dom, stride_dod, BLOCK_M, HEAD_DIM, USE_TMA, MASKED)
        dv = tl.dot(p_t.to(do.dtype), do, dv, input_precision=PRECISION)
        dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
        if MASKED:
            delta = tl.load(Delta + offs_m, mask=offs_m < N_Q, other=0.0)
        else:
            delta = tl.load(Delta + offs_m)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = tl.dot(ds_t.to(q.dtype), q, dk, input_precision=PRECISION)
    return dk, dv


@triton.jit
def _attn_bwd_dkdv_kernel(Q, K, V, DO, L, Delta, DK, DV,
                          stride_qb, stride_qh, stride_qm, stride_qd,
                          stride_kb, stride_kh, stride_kn, stride_kd,
                          stride_vb, stride_vh, stride_vn, stride_vd,
                          stride_dob, stride_doh, stride_dom, stride_dod,
                          stride_dkb, stride_dkh, stride_dkn, stride_dkd,
                          stride_dvb, stride_dvh, stride_dvn, stride_dvd,
                          H, N_Q, N_K, qk_scale, sm_scale, SEQ_BUCKET,
                          HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, TMA_OK: tl.constexpr,
                          PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          USE_TMA: tl.constexpr):
    """One program: dK and dV of one BLOCK_N-key tile of one head; K and V stay on chip.

    Under a causal mask the query tiles that see keys [n0, n0 + BLOCK_N) start at the tile
    holding row n0 (early exit at the top), the tiles straddling the diagonal are masked, and
    those from row n0 + BLOCK_N - 1 on see every key of the tile. A ragged last query tile is
    masked too. Key tiles are taken first-first: under a causal mask they have the most work.
    """
    tl.static_assert(TMA_OK or not USE_TMA)
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    n0 = pid_n * BLOCK_N
    offs_n = n0 + tl.arange(0, BLOCK_N)
    q_src = _tile_source(Q + _head_offset(pid_bh, H, stride_qb, stride_qh), N_Q, stride_qm,
                         BLOCK_M, HEAD_DIM, USE_TMA)
    do_src = _tile_source(DO + _head_offset(pid_bh, H, stride_dob, stride_doh), N_Q, stride_dom,
                          BLOCK_M, HEAD_DIM, USE_TMA)
    k = _load_tile(K + _head_offset(pid_bh, H, stride_kb, stride_kh), n0, N_K, stride_kn,
                   stride_kd, BLOCK_N, HEAD_DIM, False, True)
    v = _load_tile(V + _head_offset(pid_bh, H, stride_vb, stride_vh), n0, N_K, stride_vn,
                   stride_vd, BLOCK_N, HEAD_DIM, False, True)
    L += pid_bh.to(tl.int64) * N_Q
    Delta += pid_bh.to(tl.int64) * N_Q
    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)

    if IS_CAUSAL:
        first = n0 // BLOCK_M * BLOCK_M
        full_start = tl.cdiv(n0 + BLOCK_N - 1, BLOCK_M) * BLOCK_M
    else:
        first = 0
        full_start = 0
    full_end = N_Q // BLOCK_M * BLOCK_M
    tail_start = tl.maximum(full_start, full_end)
    # The diagonal band (masked), the full tiles (unmasked), then a ragged last tile (masked).
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_src, do_src, L, Delta, first,
                                  tl.minimum(full_start, N_Q), offs_n, N_Q, qk_scale,
                                  stride_qm, stride_qd, stride_dom, stride_dod,
                                  HEAD_DIM, BLOCK_M, IS_CAUSAL, True, USE_TMA, PRECISION)
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_src, do_src, L, Delta, full_start, full_end,
                                  offs_n, N_Q, qk_scale, stride_qm, stride_qd, stride_dom,
                                  stride_dod, HEAD_DIM, BLOCK_M, IS_CAUSAL, False, USE_TMA,
                                  PRECISION)
    dk, dv = _attn_bwd_dkdv_inner(dk, dv, k, v, q_src, do_src, L, Delta, tail_start, N_Q,
                                  offs_n, N_Q, qk_scale, stride_qm, stride_qd, stride_dom,
                                  stride_dod, HEAD_DIM, BLOCK_M, IS_CAUSAL, True, USE_TMA,
                                  PRECISION)

    _store_tile(DK + _head_offset(pid_bh, H, stride_dkb, stride_dkh), dk * sm_scale, n0, N_K,
                stride_dkn, stride_dkd, BLOCK_N, HEAD_DIM)
    _store_tile(DV + _head_offset(pid_bh, H, stride_dvb, stride_dvh), dv, n0, N_K,
                stride_dvn, stride_dvd, BLOCK_N, HEAD_DIM)


@triton.jit
def _attn_bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, lo, hi, offs_m, N_K, qk_scale,
                       stride_kn, stride_kd, stride_vn, stride_vd,
                       HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, IS_CAUSAL: tl.constexpr,
                       MASKED: tl.constexpr, USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    """Accumulate into dQ (BLOCK_M x D) the key tiles [lo, hi). lse is in base-2 units."""
    for n0 in range(lo, hi, BLOCK_N):
        k = _load_tile(k_src, n0, N_K, stride_kn, stride_kd, BLOCK_N, HEAD_DIM, USE_TMA, MASKED)
        v = _load_tile(v_src, n0, N_K, stride_vn, stride_vd, BLOCK_N, HEAD_DIM, USE_TMA, MASKED)
        s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        p = tl.exp2(s * qk_scale - lse[:, None])
        if MASKED:
            offs_n = n0 + tl.arange(0, BLOCK_N)
            visible = offs_n[None, :] < N_K
            if IS_CAUSAL:
                visible = visible & (offs_n[None, :] <= offs_m[:, None])
            p = tl.where(visible, p, 0.0)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None])
        dq = tl.dot(ds.to(k.dtype), k, dq, input_precision=PRECISION)
    return dq


@triton.jit
def _attn_bwd_dq_kernel(Q, K, V, DO, L, Delta, DQ,
                        stride_qb, stride_qh, stride_qm, stride_qd,
                        stride_kb, stride_kh, stride_kn, stride_kd,
                        stride_vb, stride_vh, stride_vn, stride_vd,
                        stride_dob, stride_doh, stride_dom, stride_dod,
                        stride_dqb, stride_dqh, stride_dqm, stride_dqd,
                        H, N_Q, N_K, qk_scale, sm_scale, SEQ_BUCKET,
                        HEAD_DIM: tl.constexpr, IS_CAUSAL: tl.constexpr, TMA_OK: tl.constexpr,
                        PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        USE_TMA: tl.constexpr):
    """One program: dQ of one BLOCK_M-row query tile of one head; Q, dO, L, Delta stay on chip.

    The key loop is the forward pass's: full tiles unmasked, diagonal and ragged tiles masked,
    nothing past the diagonal, query tiles last-first.
    """
    tl.static_assert(TMA_OK or not USE_TMA)
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    pid_bh = tl.program_id(1)
    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    k_src = _tile_source(K + _head_offset(pid_bh, H, stride_kb, stride_kh), N_K, stride_kn,
                         BLOCK_N, HEAD_DIM, USE_TMA)
    v_src = _tile_source(V + _head_offset(pid_bh, H, stride_vb, stride_vh), N_K, stride_vn,
                         BLOCK_N, HEAD_DIM, USE_TMA)
    q = _load_tile(Q + _head_offset(pid_bh, H, stride_qb, stride_qh), m0, N_Q, stride_qm,
                   stride_qd, BLOCK_M, HEAD_DIM, False, True)
    do = _load_tile(DO + _head_offset(pid_bh, H, stride_dob, stride_doh), m0, N_Q, stride_dom,
                    stride_dod, BLOCK_M, HEAD_DIM, False, True)
    row_ok = offs_m < N_Q
    lse = tl.load(L + pid_bh.to(tl.int64) * N_Q + offs_m, mask=row_ok, other=0.0) * 1.4426950408889634
    delta = tl.load(Delta + pid_bh.to(tl.int64) * N_Q + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)

    full_end = _causal_full_tiles_end(m0, N_K, BLOCK_N, IS_CAUSAL)
    keys_end = _causal_keys_end(m0, N_K, BLOCK_M, IS_CAUSAL)
    dq = _attn_bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, 0, full_end, offs_m, N_K,
                            qk_scale, stride_kn, stride_kd, stride_vn, stride_vd,
                            HEAD_DIM, BLOCK_N, IS_CAUSAL, False, USE_TMA, PRECISION)
    dq = _attn_bwd_dq_inner(dq, q, do, lse, delta, k_src, v_src, full_end, keys_end, offs_m, N_K,
                            qk_scale, stride_kn, stride_kd, stride_vn, stride_vd,
                            HEAD_DIM, BLOCK_N, IS_CAUSAL, True, USE_TMA, PRECISION)
    _store_tile(DQ + _head_offset(pid_bh, H, stride_dqb, stride_dqh), dq * sm_scale, m0, N_Q,
                stride_dqm, stride_dqd, BLOCK_M, HEAD_DIM)


# ----------------------------------------------------------------------------------------------
# Autotuning, for Hopper. A 128-row query tile over 8 warps (two warpgroups of 64 rows, wgmma's
# natural height) keeps a 128 x 128 float32 accumulator at 64 registers per thread; K/V tiles of
# 64 or 128 rows, 2-4 stages deep, fit the 228 KB of shared memory. The tile shapes below are the
# ones that won on an H200 (notes/flash_attention.md). Each comes with pointer loads and with TMA
# loads: TMA wins on long sequences, but building the tensor descriptors costs each program
# a fixed setup that short sequences (few tiles per program) do not earn back. float32 tiles take
# twice the bytes and the 3xTF32 products three times the registers, so they get small tiles.
def _configs(tiles):
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "USE_TMA": tma}, num_warps=w,
                          num_stages=s)
            for tma in (False, True) for bm, bn, w, s in tiles]


# BLOCK_M is always the query tile and BLOCK_N the key tile: (BLOCK_M, BLOCK_N, warps, stages).
_FWD_CONFIGS = _configs([(128, 64, 8, 3), (128, 128, 8, 3), (64, 64, 4, 3)])
_DKDV_CONFIGS = _configs([(64, 128, 8, 3), (64, 64, 4, 3), (32, 64, 4, 4)])
_DQ_CONFIGS = _configs([(128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3)])
_FP32_CONFIGS = [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "USE_TMA": False}, num_warps=w,
                               num_stages=2) for bm, bn, w in ((64, 32, 4), (128, 32, 8), (32, 64, 4))]
_TUNE_FROM_SEQ = 1024  # shorter sequences take the first config: tuning them is not worth it


def _prune_configs(configs, named_args, **kwargs):
    """float32 inputs get the small-tile configs, 16-bit inputs the Hopper ones; TMA configs only
    where the inputs allow TMA; short sequences only the first config left (pointer loads)."""
    fp32 = named_args["Q"].element_size() == 4
    kept = [c for c in configs if any(c is f for f in _FP32_CONFIGS) == fp32
            and (kwargs["TMA_OK"] or not c.kwargs["USE_TMA"])]
    return kept if named_args["SEQ_BUCKET"] >= _TUNE_FROM_SEQ else kept[:1]


def _autotune(configs):
    return triton.autotune(configs=configs + _FP32_CONFIGS,
                           key=["SEQ_BUCKET", "HEAD_DIM", "IS_CAUSAL", "TMA_OK"],
                           prune_configs_by={"early_config_prune": _prune_configs},
                           cache_results=True)  # winners kept on disk with the compiled kernels


_attn_fwd = _autotune(_FWD_CONFIGS)(_attn_fwd_kernel)
_attn_bwd_dkdv = _autotune(_DKDV_CONFIGS)(_attn_bwd_dkdv_kernel)
_attn_bwd_dq = _autotune(_DQ_CONFIGS)(_attn_bwd_dq_kernel)

# Fixed small tiles for Triton's CPU interpreter (TRITON_INTERPRET=1), where autotuning would only
# cost time; tests change them to exercise other tile shapes, and INTERPRETER_TMA to run the
# tensor-descriptor path (the interpreter emulates it).
INTERPRETER_TILES = {"fwd": (32, 16), "dkdv": (16, 32), "dq": (32, 16)}
INTERPRETER_TMA = False
# Set to False to keep every load on the pointer path on the GPU too (tests, comparisons).
ALLOW_TMA = True


# ----------------------------------------------------------------------------------------------
# Host side
def _check_inputs(q, k, v, is_causal):
    if not all(isinstance(t, torch.Tensor) for t in (q, k, v)):
        raise ValueError("flash_attention expects q, k and v to be torch.Tensor")
    if not isinstance(is_causal, bool):
        raise ValueError(f"is_causal must be a bool, got {type(is_causal).__name__}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k and v must be 4-D (B, H, N, D); got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.dtype not in _SUPPORTED_DTYPES:
        raise ValueError(f"supported dtypes are float16, bfloat16 and float32, got {q.dtype}")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"q, k and v must share a dtype; got {q.dtype}, {k.dtype}, {v.dtype}")
    if k.device != q.device or v.device != q.device:
        raise ValueError(f"q, k and v must be on one device; got {q.device}, {k.device}, {v.device}")
    b, h, n_q, d = q.shape
    if d not in _SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dimension D must be one of {_SUPPORTED_HEAD_DIMS}, got {d}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape; got {tuple(k.shape)} and {tuple(v.shape)}")
    if k.shape[0] != b or k.shape[1] != h or k.shape[3] != d:
        raise ValueError(f"k and v must be (B, H, Nk, D) = ({b}, {h}, Nk, {d}) to match q; "
                         f"got {tuple(k.shape)}")
    if b < 1 or h < 1 or n_q < 1 or k.shape[2] < 1:
        raise ValueError(f"B, H, Nq and Nk must all be >= 1; got q {tuple(q.shape)}, k {tuple(k.shape)}")


@functools.cache
def _capability(device):
    return torch.cuda.get_device_capability(device)


def _tma_ok(*tensors):
    """Whether tiles of these tensors may be read through TMA descriptors: in the interpreter when
    INTERPRETER_TMA asks for it; on a GPU with Hopper or later, unit stride along D and 16-byte
    aligned bases and strides (each head's base is the tensor's base plus multiples of the B and
    H strides)."""
    if not tensors[0].is_cuda:
        return INTERPRETER_TMA
    if not ALLOW_TMA or _capability(tensors[0].device)[0] < 9:
        return False
    for t in tensors:
        size = t.element_size()
        if t.stride(3) != 1 or t.data_ptr() % 16 or any((s * size) % 16 for s in t.stride()[:3]):
            return False
    return True


def _tma_allocator(size, alignment, stream):
    # Tensor descriptors built inside a kernel (tl.make_tensor_descriptor) live in global scratch.
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _launch(tuned_kernel, rows, block_name, n_bh, args, meta, tile_key):
    """Launch over (cdiv(rows, tile), B * H) programs: through the autotuner on a GPU, with the
    fixed ``INTERPRETER_TILES`` in Triton's interpreter. block_name names the tile that the grid
    walks: BLOCK_M (query tiles) or BLOCK_N (key tiles)."""
    if args[0].is_cuda:
        if meta["TMA_OK"]:
            triton.set_allocator(_tma_allocator)
        tuned_kernel[lambda cfg: (triton.cdiv(rows, cfg[block_name]), n_bh)](*args, **meta)
    else:
        tiles = dict(zip(("BLOCK_M", "BLOCK_N"), INTERPRETER_TILES[tile_key]))
        tuned_kernel.fn[(triton.cdiv(rows, tiles[block_name]), n_bh)](
            *args, **meta, **tiles, USE_TMA=meta["TMA_OK"])


def _strides(t):
    return tuple(t.stride())


class FlashAttention2(torch.autograd.Function):
    """FlashAttention-2: Triton forward and backward; only O and L are kept for backward."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        _check_inputs(q, k, v, is_causal)
        b, h, n_q, d = q.shape
        n_k = k.shape[2]
        o = torch.empty_like(q)  # keeps q's layout, e.g. a transposed (B, N, H, D) buffer
        lse = torch.empty((b, h, n_q), device=q.device, dtype=torch.float32)
        meta = dict(HEAD_DIM=d, IS_CAUSAL=is_causal, TMA_OK=_tma_ok(q, k, v),
                    PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32")
        qk_scale = _LOG2E / math.sqrt(d)
        bucket = triton.next_power_of_2(max(n_q, n_k))
        args = (q, k, v, o, lse, *_strides(q), *_strides(k), *_strides(v), *_strides(o),
                h, n_q, n_k, qk_scale, bucket)
        _launch(_attn_fwd, n_q, "BLOCK_M", b * h, args, meta, "fwd")
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.is_causal = is_causal
        return o

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, o, lse = ctx.saved_tensors
        b, h, n_q, d = q.shape
        n_k = k.shape[2]
        do = grad_out
        if do.dtype != q.dtype:
            do = do.to(q.dtype)
        delta = torch.empty_like(lse)
        pre_block = 64 if q.is_cuda else 32
        _attn_bwd_preprocess_kernel[(triton.cdiv(n_q, pre_block), b * h)](
            o, do, delta, *_strides(o), *_strides(do), h, n_q, HEAD_DIM=d, BLOCK_M=pre_block)

        dq = torch.empty_like(q)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        meta = dict(HEAD_DIM=d, IS_CAUSAL=ctx.is_causal, TMA_OK=_tma_ok(q, k, v, do),
                    PRECISION="tf32x3" if q.dtype == torch.float32 else "tf32")
        sm_scale = 1.0 / math.sqrt(d)
        bucket = triton.next_power_of_2(max(n_q, n_k))
        common = (*_strides(q), *_strides(k), *_strides(v), *_strides(do))
        _launch(_attn_bwd_dkdv, n_k, "BLOCK_N", b * h,
                (q, k, v, do, lse, delta, dk, dv, *common, *_strides(dk), *_strides(dv),
                 h, n_q, n_k, sm_scale * _LOG2E, sm_scale, bucket), meta, "dkdv")
        _launch(_attn_bwd_dq, n_q, "BLOCK_M", b * h,
                (q, k, v, do, lse, delta, dq, *common, *_strides(dq),
                 h, n_q, n_k, sm_scale * _LOG2E, sm_scale, bucket), meta, "dq")
        return dq, dk, dv, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    is_causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(D)) v, differentiable; see the module docstring.

    q: (B, H, Nq, D); k, v: (B, H, Nk, D); float16, bfloat16 or float32, one dtype and device;
    D in {16, 32, 64, 128}; any strides. With ``is_causal`` query i attends to keys j <= i
    (top-left aligned, also when Nq != Nk). Returns O with q's shape, dtype and layout. Raises
    ValueError for unsupported or mismatched inputs.
    """
    return FlashAttention2.apply(q, k, v, is_causal)
