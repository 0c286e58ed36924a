"""Row-wise softmax in Triton: reference solution.

``triton_softmax(x)`` computes ``softmax(x, dim=-1)`` for a 2-D tensor ``x`` of shape (M, N).

Softmax is memory-bound: per element it does a handful of flops and one exp, but it must read
the element once and write the result once. On an H200 that is about 4.3 TB/s of traffic
against almost 1000 TFLOP/s of matrix math, so the whole game is *how many times each byte
crosses the memory bus*. Softmax written as PyTorch ops (max, subtract, exp, sum, divide)
launches five kernels and moves the tensor through memory eight times; a fused kernel moves it
twice. That is the
lecture's point about fusion, and it is what this file is built around.

Three ways cover all row lengths:

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

3. **Long rows, one pass** (a layer on 2, for rows that a group of resident programs can hold):
   the programs that share a row keep their chunks in registers and wait for each other's
   (m, s) instead of re-reading the row, so long rows too cost one read and one write. Waiting
   between programs is safe only among programs that all run at once, so this kernel launches
   no more than the GPU holds and bounds every wait; see ``_softmax_one_pass_kernel``. Rows
   longer than a resident group can hold (about a million elements on an H200) keep path 2.

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
# One-pass path for long rows: elements of a row per program (held in registers: 64 float32 per
# thread at 8 warps; on the H200 16384 ran at 3.3 TB/s where 8192 ran at 2.5), a register cap per
# thread that makes two programs fit on an SM for sure (compiled for sm_90: 128 registers and no
# spills for contiguous float32 rows at 16384; without the cap an unaligned row took 160 and so
# left room for one program per SM), and how many times a program reads its row's arrival
# counter before it stops waiting (far more than a resident group ever needs; it only bounds what
# a group that is not all running costs).
_ONE_PASS_CHUNK = 16384
_ONE_PASS_NUM_WARPS = 8
_ONE_PASS_MAX_REGISTERS = 128
_SM_REGISTERS = 65536  # per SM, every NVIDIA GPU since Maxwell
_ONE_PASS_SPIN_LIMIT = 1 << 16


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
def _merged_stats(pmax_ptr, psum_ptr, first, n, BLOCK: tl.constexpr, VOLATILE: tl.constexpr):
    """A row's n partial (m, s) pairs, stored from ``first`` on, merged with the online-softmax
    rule: the row's maximum and 1 / its sum of exp(x - max). VOLATILE reads them from memory
    every time (pairs another program of the same launch has just written)."""
    k = tl.arange(0, BLOCK)
    pm = tl.load(pmax_ptr + first + k, mask=k < n, other=-float("inf"), volatile=VOLATILE)
    ps = tl.load(psum_ptr + first + k, mask=k < n, other=0.0, volatile=VOLATILE)
    m = tl.max(pm, axis=0)
    # A row of all -inf gives m = -inf and s = NaN here, hence a NaN row, as torch.softmax does.
    return m, 1.0 / tl.sum(ps * tl.exp(pm - m), axis=0)


@triton.jit
def _softmax_normalize_kernel(x_ptr, y_ptr, pmax_ptr, psum_ptr, N, stride_xm, stride_xn,
                              stride_ym, n_chunks, tiles_per_chunk, BLOCK_N: tl.constexpr,
                              BLOCK_CHUNKS: tl.constexpr):
    """Pass 2 of the long-row path: merge the row's partials, then write exp(x - m) / s."""
    pid = tl.program_id(0)
    row = pid // n_chunks
    chunk = pid % n_chunks

    m, inv_sum = _merged_stats(pmax_ptr, psum_ptr, row * n_chunks, n_chunks, BLOCK_CHUNKS, False)

    x_row = x_ptr + row.to(tl.int64) * stride_xm
    y_row = y_ptr + row.to(tl.int64) * stride_ym
    start = chunk * tiles_per_chunk * BLOCK_N
    cols = tl.arange(0, BLOCK_N)
    for t in range(tiles_per_chunk):
        c = start + t * BLOCK_N + cols
        x = tl.load(x_row + c * stride_xn, mask=c < N, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m) * inv_sum
        tl.store(y_row + c, y.to(y_ptr.dtype.element_ty), mask=c < N)


# ----------------------------------------------------------------------------------------------
# Layer: one pass over long rows, a row shared by a group of programs that wait for each other.
#
# The split path reads a long row twice because its two passes are two kernels: by the time the
# second one re-reads a row, a gigabyte has streamed through the 60 MB L2 and the row comes from
# DRAM again. If instead the programs that share a row each keep their chunk in registers, they
# only need each other's (m, s) summaries before they can normalise: one read, one write, as for
# short rows. That needs the programs of a row to *wait* for one another, which a Triton kernel
# may do only if they all run at the same time; a program waiting for one that has not been
# scheduled yet (because the waiter occupies the SM it needs) would wait forever.
#
# So the kernel is persistent: it launches only as many programs as the GPU holds at once (two
# per SM), in groups of ``n_parts``, and each group walks its share of the rows. A program
# publishes its chunk's (m, s), adds one to the row's arrival counter, and spins until the
# counter reaches ``n_parts``. A wait is bounded (``spin_limit`` reads): a program whose partners
# do not arrive in time (a GPU busy with something else, or Triton's interpreter, which runs
# programs one after another) marks its chunk late, stops waiting for the rest of its rows, and
# ``_softmax_late_chunks_kernel`` finishes the late chunks afterwards the split path's way
# (re-reading them). Nothing can hang, and the result is the same either way: every program
# merges the same (m, s) pairs in the same order.
@triton.jit
def _softmax_one_pass_kernel(x_ptr, y_ptr, pmax_ptr, psum_ptr, arrived_ptr, late_ptr, M, N,
                             stride_xm, stride_xn, stride_ym, n_parts, n_groups, spin_limit,
                             CHUNK: tl.constexpr, BLOCK_PARTS: tl.constexpr, REREAD: tl.constexpr):
    """Programs ``g * n_parts .. g * n_parts + n_parts - 1`` share rows g, g + n_groups, ...: each
    holds one CHUNK of the row in registers while the group agrees on the row's (max, sum).

    With REREAD a program keeps nothing through the wait: it reads its chunk again afterwards,
    from L2 (the rows in flight are a few MB of its 50 MB), so its registers are free and more
    programs fit an SM to overlap one another's waits. Not the default until the H200 says it
    pays (``benchmarks/bench_softmax_matmul.py --sweep softmax``)."""
    pid = tl.program_id(0)
    group = pid // n_parts
    part = pid % n_parts
    cols = part * CHUNK + tl.arange(0, CHUNK)
    limit = spin_limit
    for row in range(group, M, n_groups):
        x_row = x_ptr + tl.cast(row, tl.int64) * stride_xm
        if REREAD:  # kept in L2 for the second read
            x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        m_ref = tl.where(m == -float("inf"), 0.0, m)  # an all -inf chunk sums to exactly 0
        tl.store(pmax_ptr + row * n_parts + part, m)
        tl.store(psum_ptr + row * n_parts + part, tl.sum(tl.exp(x - m_ref), axis=0))
        tl.debug_barrier()  # every thread's part of the stores above, before the release below
        # acq_rel: our (m, s) is published before the count says so, and if we arrive last we
        # see everyone else's
        arrived = tl.atomic_add(arrived_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
        tries = 0
        while (arrived < n_parts) & (tries < limit):
            arrived = tl.atomic_add(arrived_ptr + row, 0, sem="acquire", scope="gpu")
            tries += 1
        if arrived < n_parts:
            tl.store(late_ptr + row * n_parts + part, 1)
            tl.atomic_add(arrived_ptr + M, 1)  # one more late chunk for the second kernel
            limit = 0  # the group is not all running: stop waiting for it
        else:
            tl.debug_barrier()
            row_max, inv_sum = _merged_stats(pmax_ptr, psum_ptr, row * n_parts, n_parts,
                                             BLOCK_PARTS, True)
            if REREAD:
                x = tl.load(x_row + cols * stride_xn, mask=cols < N, other=-float("inf"),
                            eviction_policy="evict_first").to(tl.float32)
            y = tl.exp(x - row_max) * inv_sum
            y_row = y_ptr + tl.cast(row, tl.int64) * stride_ym
            tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def _softmax_late_chunks_kernel(x_ptr, y_ptr, pmax_ptr, psum_ptr, arrived_ptr, late_ptr, M, N,
                                stride_xm, stride_xn, stride_ym, n_parts, n_groups,
                                CHUNK: tl.constexpr, BLOCK_PARTS: tl.constexpr):
    """The chunks whose programs stopped waiting, merged and written as the split path does; laid
    out as the one-pass kernel is. ``arrived[M]`` counts late chunks: when none were (the usual
    case) every program reads that one number and exits."""
    if tl.load(arrived_ptr + M) != 0:
        pid = tl.program_id(0)
        part = pid % n_parts
        cols = part * CHUNK + tl.arange(0, CHUNK)
        for row in range(pid // n_parts, M, n_groups):
            if tl.load(late_ptr + row * n_parts + part) != 0:
                row_max, inv_sum = _merged_stats(pmax_ptr, psum_ptr, row * n_parts, n_parts,
                                                 BLOCK_PARTS, False)
                x = tl.load(x_ptr + tl.cast(row, tl.int64) * stride_xm + cols * stride_xn,
                            mask=cols < N, other=-float("inf")).to(tl.float32)
                y = tl.exp(x - row_max) * inv_sum
                tl.store(y_ptr + tl.cast(row, tl.int64) * stride_ym + cols,
                         y.to(y_ptr.dtype.element_ty), mask=cols < N)


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


def _resident_programs(x, num_warps=_ONE_PASS_NUM_WARPS, max_registers=_ONE_PASS_MAX_REGISTERS):
    """How many one-pass programs are sure to run at once. On a GPU the register cap decides:
    an SM's 64K registers hold 65536 / (max_registers x 32 x num_warps) programs (two at 8 warps
    and 128 registers), within its 2048 threads and shared memory. The interpreter runs one
    program at a time, so any number will do there."""
    if not x.is_cuda:
        return 64
    per_sm = min(_SM_REGISTERS // (max_registers * 32 * num_warps), 2048 // (32 * num_warps))
    return max(1, per_sm) * torch.cuda.get_device_properties(x.device).multi_processor_count


def _one_pass_parts(x, chunk=_ONE_PASS_CHUNK, num_warps=_ONE_PASS_NUM_WARPS, max_registers=_ONE_PASS_MAX_REGISTERS):
    """Programs per row for the one-pass path, or 0 where it does not apply (rows too long for
    a group to be resident at once with room to spare)."""
    parts = triton.cdiv(x.shape[1], chunk)
    return parts if parts <= _resident_programs(x, num_warps, max_registers) // 2 else 0


def _one_pass_pays(x, parts):
    """Whether the one-pass path beats the split path here (measured on the H200: notes/softmax_matmul.md).
    Only for 4-byte elements: a 2-byte chunk keeps half the bytes in flight per program, and bf16
    rows ran at 2.3 TB/s one-pass against 2.7 split. And only where the rows fill one wave of
    groups or at least four: with two or three waves (8 rows of 1M) the last wave's idle SMs cost
    more than the split path's second read."""
    if x.element_size() != 4:
        return False
    waves = x.shape[0] / max(1, _resident_programs(x) // parts)
    return waves <= 1 or waves >= 4


def _one_pass_plan(x):
    """Programs per row where ``triton_softmax`` takes a long row in one pass; 0 for the split path."""
    parts = _one_pass_parts(x)
    return parts if parts and _one_pass_pays(x, parts) else 0


def _one_pass_launch(x, y, parts, chunk=_ONE_PASS_CHUNK, spin_limit=None, num_warps=_ONE_PASS_NUM_WARPS,
                     reread=False, max_registers=_ONE_PASS_MAX_REGISTERS):
    M, N = x.shape
    n_groups = min(M, _resident_programs(x, num_warps, max_registers) // parts)
    pmax = torch.empty((M, parts), device=x.device, dtype=torch.float32)
    psum = torch.empty_like(pmax)
    # one zeroed buffer (one memset): arrivals per row, [M] the number of late chunks, then a
    # late flag per chunk
    counters = torch.zeros(M + 1 + M * parts, device=x.device, dtype=torch.int32)
    arrived, late = counters[: M + 1], counters[M + 1:]
    if spin_limit is None:  # the interpreter runs one program at a time: nobody to wait for
        spin_limit = _ONE_PASS_SPIN_LIMIT if x.is_cuda else 0
    block_parts = triton.next_power_of_2(parts)
    _softmax_one_pass_kernel[(n_groups * parts,)](
        x, y, pmax, psum, arrived, late, M, N, x.stride(0), x.stride(1), y.stride(0), parts,
        n_groups, spin_limit, CHUNK=chunk, BLOCK_PARTS=block_parts, REREAD=reread, num_warps=num_warps,
        maxnreg=max_registers)
    _softmax_late_chunks_kernel[(n_groups * parts,)](
        x, y, pmax, psum, arrived, late, M, N, x.stride(0), x.stride(1), y.stride(0), parts,
        n_groups, CHUNK=chunk, BLOCK_PARTS=block_parts, num_warps=num_warps)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, as ``torch.softmax(x, dim=-1)``.

    Accepts float32, float16 and bfloat16 with any strides; computes in float32 and returns a
    new contiguous tensor of the input's dtype. Rows of up to ``_MAX_FUSED_N`` elements take the
    one-pass kernel (one read, one write); longer rows are shared by a group of programs that
    agree on the row's maximum and sum (one read, one write), and rows too long for that take the
    split online-softmax path (two reads, one write). Raises ValueError for anything that is not
    a 2-D floating tensor.
    """
    _check_input(x)
    M, N = x.shape
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0:
        return y
    if N <= _MAX_FUSED_N:
        _fused_launch(x, y)
    elif parts := _one_pass_plan(x):
        _one_pass_launch(x, y, parts)
    else:
        _split_launch(x, y)
    return y
