"""Row-wise softmax in Triton: reference solution.

``triton_softmax(x)`` computes ``softmax(x, dim=-1)`` for a 2-D tensor ``x`` of shape (M, N).

Softmax is memory-bound: per element it does a handful of flops and one exp, but it must read
the element once and write the result once. On an H200 that is about 4.3 TB/s of traffic
against almost 1000 TFLOP/s of matrix math, so the whole game is *how many times each byte
crosses the memory bus*. Softmax written as PyTorch ops (max, subtract, exp, sum, divide)
launches five kernels and moves the tensor through memory eight times; a fused kernel moves it
twice. That is the
lecture's point about fusion, and it is what this file is built around.

Two kernels cover all row lengths:

1. **Short rows** (N up to ``_MAX_FUSED_N``): the whole row fits in registers. One program
   loads ``BLOCK_M`` rows, computes max, exp, sum and the normalised result without touching
   memory again, and stores it. Exactly one read and one write per element. Several short rows
   share a program so that every program still moves enough bytes to keep the memory system
   busy (a 128-element row alone would be a tiny, mostly idle program).

2. **Long rows** (N up to millions): a row no longer fits on chip, so we need the *online
   softmax* recurrence. Scanning a row block by block we keep a running maximum ``m`` and a
   running sum ``s`` of ``exp(x - m)``; when a block raises the maximum from ``m`` to ``m'``
   the old sum is rescaled by ``exp(m - m')``:

       m' = max(m, max(block))
       s' = s * exp(m - m') + sum(exp(block - m'))

   The same rule merges the (m, s) summaries of *any* two pieces of a row, in any order: it is
   associative. So we do not have to scan a row in one program. The row is cut into chunks;
   ``_softmax_partials_kernel`` runs one program per (row, chunk) and writes that chunk's (m, s);
   ``_softmax_normalize_kernel`` runs one program per (row, chunk) again, merges the row's few
   (m, s) pairs (cheap, they are tiny and sit in L2), re-reads its chunk and writes
   ``exp(x - m) / s``. Splitting rows this way keeps all the SMs busy even when there are only a
   few rows (M=1, N=1,048,576 uses 128 programs instead of 1). The price of long rows is one
   extra read of the input (three transfers instead of two), because the maximum of the whole row
   is known only after the last element has been seen; a 1 MB row is far too big to stay in L2
   until it is re-read. At the H200's ~4.4 TB/s for reads and ~4.2 TB/s for copies, that bounds
   the long-row path at about 2.85 TB/s of "effective" bandwidth (bytes read once + written once,
   over time); it reaches about 2.8.

Numerics: every input is converted to float32 on load and all arithmetic is float32; the result
is cast back to the input dtype on store. Subtracting the row maximum keeps ``exp`` in range
(inputs around +-1e4 are fine). ``-inf`` entries give exactly 0. A row that is entirely ``-inf``
has no maximum; like ``torch.softmax`` we return NaN for it, which falls out of the arithmetic
(``-inf - (-inf)`` is NaN) without a special case. The online recurrence guards the one place
where that NaN would be wrong: a chunk that *starts* with blocks of ``-inf`` before finite values.

Strides: the kernels take a row stride and a column stride, so transposed and sliced inputs work
without a copy. (Triton compiles a separate version for a column stride of 1, so the contiguous
case keeps its wide, coalesced loads.) The output is a new contiguous tensor; the input is never
written.
"""
import torch
import triton
import triton.language as tl

# Tuning, from the sweeps in benchmarks/bench_softmax_matmul.py --sweep on an H200 (see
# notes/softmax_matmul.md). Longest row the one-pass kernel keeps in registers: at 32 warps
# (1024 threads) that is 32 float32 values per thread. Longer rows take the split path.
_MAX_FUSED_N = 32768
# One-pass kernel: about this many elements per program (several rows when N is small), and
# 128 bytes of input per thread (eight 16-byte loads in flight), which sets num_warps.
_FUSED_ELEMS_PER_PROGRAM = 4096
_FUSED_BYTES_PER_THREAD = 128
# Split path: elements per loop iteration, warps per program, and how many programs to aim for
# (many small programs balance better across the 132 SMs than a few long ones).
_SPLIT_BLOCK_N = 8192
_SPLIT_NUM_WARPS = 4
_SPLIT_TARGET_PROGRAMS = 32768


@triton.jit
def _softmax_fused_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program normalises BLOCK_M whole rows held in registers: one read, one write."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    # 64-bit row offsets: M * stride can exceed 2**31 elements on large tensors.
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_xm + cols[None, :] * stride_xn,
                mask=mask, other=-float("inf")).to(tl.float32)
    # Padding columns hold -inf, so they contribute exp(-inf) = 0 to the sum.
    row_max = tl.max(x, axis=1)
    e = tl.exp(x - row_max[:, None])
    inv_sum = 1.0 / tl.sum(e, axis=1)
    y = e * inv_sum[:, None]
    tl.store(y_ptr + rows64[:, None] * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _softmax_partials_kernel(x_ptr, pmax_ptr, psum_ptr, N, stride_xm, stride_xn, n_chunks,
                             tiles_per_chunk, BLOCK_N: tl.constexpr):
    """Pass 1 of the long-row path: online (max, sum of exp) over one chunk of one row."""
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid % n_chunks
    x_row = x_ptr + row.to(tl.int64) * stride_xm
    start = chunk * tiles_per_chunk * BLOCK_N
    cols = tl.arange(0, BLOCK_N)

    m = -float("inf")  # running maximum
    s = 0.0            # running sum of exp(x - m)
    for t in range(tiles_per_chunk):
        c = start + t * BLOCK_N + cols
        x = tl.load(x_row + c * stride_xn, mask=c < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # While every value seen is -inf, m_new is -inf and exp(m - m_new) would be NaN;
        # measuring from 0 instead keeps s at exactly 0 until a finite value arrives.
        m_ref = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - m_ref) + tl.sum(tl.exp(x - m_ref), axis=0)
        m = m_new
    tl.store(pmax_ptr + pid, m)
    tl.store(psum_ptr + pid, s)


@triton.jit
def _softmax_normalize_kernel(x_ptr, y_ptr, pmax_ptr, psum_ptr, N, stride_xm, stride_xn,
                              stride_ym, n_chunks, tiles_per_chunk, BLOCK_N: tl.constexpr,
                              BLOCK_CHUNKS: tl.constexpr):
    """Pass 2 of the long-row path: merge the row's partials, then write exp(x - m) / s."""
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid % n_chunks

    # Merge all (m, s) pairs of this row with the online-softmax rule.
    k = tl.arange(0, BLOCK_CHUNKS)
    pm = tl.load(pmax_ptr + row * n_chunks + k, mask=k < n_chunks, other=-float("inf"))
    ps = tl.load(psum_ptr + row * n_chunks + k, mask=k < n_chunks, other=0.0)
    m = tl.max(pm, axis=0)
    # A row of all -inf gives m = -inf and s = NaN here, hence a NaN row, as torch.softmax does.
    inv_sum = 1.0 / tl.sum(ps * tl.exp(pm - m), axis=0)

    x_row = x_ptr + row.to(tl.int64) * stride_xm
    y_row = y_ptr + row.to(tl.int64) * stride_ym
    start = chunk * tiles_per_chunk * BLOCK_N
    cols = tl.arange(0, BLOCK_N)
    for t in range(tiles_per_chunk):
        c = start + t * BLOCK_N + cols
        x = tl.load(x_row + c * stride_xn, mask=c < N, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) * inv_sum
        tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=c < N)


def _check_input(x):
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"triton_softmax expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2:
        raise ValueError(f"triton_softmax expects a 2-D tensor (M, N), got shape {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise ValueError(f"triton_softmax supports float32, float16 and bfloat16, got {x.dtype}")


def _fused_launch(x, y, block_m=None, num_warps=None):
    M, N = x.shape
    block_n = triton.next_power_of_2(N)
    if block_m is None:
        block_m = max(1, min(_FUSED_ELEMS_PER_PROGRAM // block_n, triton.next_power_of_2(M)))
    if num_warps is None:
        threads = block_m * block_n * x.element_size() // _FUSED_BYTES_PER_THREAD
        num_warps = min(32, max(4, threads // 32))
    grid = (triton.cdiv(M, block_m),)
    _softmax_fused_kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0),
                                BLOCK_M=block_m, BLOCK_N=block_n, num_warps=num_warps)


def _split_launch(x, y, block_n=None, target_programs=None, num_warps=None):
    M, N = x.shape
    block_n = min(triton.next_power_of_2(N), block_n or _SPLIT_BLOCK_N)
    n_tiles = triton.cdiv(N, block_n)
    # As many chunks per row as needed to launch about target_programs programs in all, but
    # at most 1024 per row (the normalising pass merges them in one vector).
    chunks_wanted = max(1, (target_programs or _SPLIT_TARGET_PROGRAMS) // M)
    tiles_per_chunk = max(triton.cdiv(n_tiles, chunks_wanted), triton.cdiv(n_tiles, 1024))
    n_chunks = triton.cdiv(n_tiles, tiles_per_chunk)
    warps = num_warps or _SPLIT_NUM_WARPS
    pmax = torch.empty((M, n_chunks), device=x.device, dtype=torch.float32)
    psum = torch.empty_like(pmax)
    grid = (M * n_chunks,)
    _softmax_partials_kernel[grid](x, pmax, psum, N, x.stride(0), x.stride(1), n_chunks,
                                   tiles_per_chunk, BLOCK_N=block_n, num_warps=warps)
    _softmax_normalize_kernel[grid](x, y, pmax, psum, N, x.stride(0), x.stride(1), y.stride(0),
                                    n_chunks, tiles_per_chunk, BLOCK_N=block_n,
                                    BLOCK_CHUNKS=triton.next_power_of_2(n_chunks),
                                    num_warps=warps)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, as ``torch.softmax(x, dim=-1)``.

    Accepts float32, float16 and bfloat16 with any strides; computes in float32 and returns a
    new contiguous tensor of the input's dtype. Rows of up to ``_MAX_FUSED_N`` elements take the
    one-pass kernel (one read, one write); longer rows take the split online-softmax path (two
    reads, one write). Raises ValueError for anything that is not a 2-D floating tensor.
    """
    _check_input(x)
    M, N = x.shape
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return y
    if N <= _MAX_FUSED_N:
        _fused_launch(x, y)
    else:
        _split_launch(x, y)
    return y
