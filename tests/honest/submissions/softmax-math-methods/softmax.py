"""Row softmax: online (max, sum) sweep in base 2, then a normalising sweep.

exp is computed as exp2(x * log2(e)) (what the hardware does anyway), the division with
tl.math.div_rn. A DEBUG switch prints per-row statistics with tl.device_print.
"""

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

LOG2E = tl.constexpr(1.4426950408889634)
DEBUG = False


@triton.jit
def _softmax_fwd(
    X, Y,
    n_cols,
    stride_xm, stride_xn,
    stride_ym, stride_yn,
    BLOCK_N: tl.constexpr,
    DEBUG: tl.constexpr,
):
    tl.static_assert(BLOCK_N % 16 == 0, "BLOCK_N must be a multiple of 16")
    tl.static_assert(BLOCK_N <= 65536)

    row = tl.program_id(0).to(tl.int64)
    x_row = X + row * stride_xm
    y_row = Y + row * stride_ym
    cols = tl.arange(0, BLOCK_N)

    # sweep 1: running max and running sum (relative to the running max), in float32
    m = tl.full([], float("-inf"), tl.float32)
    l = tl.full([], 0.0, tl.float32)
    for start in tl.range(0, n_cols, BLOCK_N):
        offs = start + cols
        x = tl.load(x_row + offs * stride_xn, mask=offs < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        # while everything seen is -inf, m_new is -inf: exp2(-inf - -inf) would be NaN
        safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        scale = tl.math.exp2((m - safe) * LOG2E)
        l = l * scale + tl.sum(tl.math.exp2((x - safe) * LOG2E), axis=0)
        m = m_new

    if DEBUG:
        tl.device_print("row max", m)
        tl.device_print("row sum", l)

    tl.debug_barrier()

    # sweep 2: write exp(x - m) / l; a row of -inf gives (-inf - -inf) = NaN, as torch.softmax does
    inv_l = tl.math.div_rn(1.0, l)
    for start in tl.range(0, n_cols, BLOCK_N):
        offs = start + cols
        msk = offs < n_cols
        x = tl.load(x_row + offs * stride_xn, mask=msk, other=float("-inf")).to(tl.float32)
        p = ((x - m) * LOG2E).exp2()  # tensor method, as in torch
        y = tl.where(l == 0.0, p / l, p * inv_l)
        tl.store(y_row + offs * stride_yn, y.to(Y.dtype.element_ty), mask=msk)


def _pick_block(n_cols: int, on_gpu: bool) -> tuple[int, int]:
    if not on_gpu:
        return 16, 1
    block = min(triton.next_power_of_2(n_cols), 4096)
    block = max(block, 16)
    warps = 4 if block <= 1024 else (8 if block <= 2048 else 16)
    return block, warps


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2, "expected a 2-D tensor"
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if n_rows == 0 or n_cols == 0:
        return y
    block, warps = _pick_block(n_cols, x.is_cuda)
    _softmax_fwd[(n_rows,)](
        x, y, n_cols,
        x.stride(0), x.stride(1),
        y.stride(0), y.stride(1),
        BLOCK_N=block, DEBUG=DEBUG, num_warps=warps,
    )
    return y
