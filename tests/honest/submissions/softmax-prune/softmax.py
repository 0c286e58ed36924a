"""Softmax with two kernels.

Short rows (N <= 8192): a whole row sits in registers; each program takes ROWS rows. Autotuned
over ROWS / num_warps, with configs that would hold too many elements pruned away.

Long rows: the "safe softmax" three sweeps from the lecture: one sweep for the max, one for the
sum of exp(x - max), one to write. Slower than online softmax (3 reads), but simple.
"""

import torch
import triton
import triton.language as tl

MAX_ELEMS_PER_PROGRAM = 16384


def _keep_small_enough(configs, named_args, **kwargs):
    """Drop configs that would put more than MAX_ELEMS_PER_PROGRAM elements in one program,
    or more rows per program than there are rows."""
    width = kwargs["BLOCK_N"]
    n_rows = named_args["n_rows"]
    keep = [c for c in configs
            if c.kwargs["ROWS"] * width <= MAX_ELEMS_PER_PROGRAM
            and c.kwargs["ROWS"] <= max(1, triton.next_power_of_2(n_rows))]
    if not keep:  # always leave one: the smallest
        keep = [min(configs, key=lambda c: c.kwargs["ROWS"])]
    return keep


@triton.autotune(
    configs=[triton.Config({"ROWS": r}, num_warps=w)
             for r, w in [(16, 4), (8, 4), (4, 4), (2, 8), (1, 8), (1, 16)]],
    key=["n_cols"],
    prune_configs_by={"early_config_prune": _keep_small_enough},
)
@triton.jit
def _short_rows(x_ptr, y_ptr, n_rows, n_cols, sxr, sxc, syr,
                ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK_N)
    inside = (r[:, None] < n_rows) & (c[None, :] < n_cols)
    r64 = r.to(tl.int64)
    x = tl.load(x_ptr + r64[:, None] * sxr + c[None, :] * sxc, mask=inside, other=float("-inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    den = tl.sum(num, axis=1)
    tl.store(y_ptr + r64[:, None] * syr + c[None, :], (num / den[:, None]).to(y_ptr.dtype.element_ty), mask=inside)


@triton.jit
def _long_rows(x_ptr, y_ptr, n_cols, sxr, sxc, syr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_ptr += row * sxr
    y_ptr += row * syr
    cols = tl.arange(0, BLOCK)

    biggest = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        idx = start + cols
        v = tl.load(x_ptr + idx * sxc, mask=idx < n_cols, other=float("-inf"))
        biggest = tl.maximum(biggest, v.to(tl.float32))
    m = tl.max(biggest, axis=0)

    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        idx = start + cols
        v = tl.load(x_ptr + idx * sxc, mask=idx < n_cols, other=float("-inf"))
        acc += tl.exp(v.to(tl.float32) - m)
    inv = 1.0 / tl.sum(acc, axis=0)

    for start in range(0, n_cols, BLOCK):
        idx = start + cols
        v = tl.load(x_ptr + idx * sxc, mask=idx < n_cols, other=float("-inf"))
        tl.store(y_ptr + idx, (tl.exp(v.to(tl.float32) - m) * inv).to(y_ptr.dtype.element_ty), mask=idx < n_cols)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2:
        raise ValueError(f"softmax wants a 2-D tensor, got {x.dim()}-D")
    n_rows, n_cols = x.shape
    y = torch.empty(x.shape, device=x.device, dtype=x.dtype)
    if y.numel() == 0:
        return y
    if n_cols <= 8192:
        grid = lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)
        _short_rows[grid](x, y, n_rows, n_cols, x.stride(0), x.stride(1), y.stride(0),
                          BLOCK_N=triton.next_power_of_2(n_cols))
    else:
        block = 4096 if x.is_cuda else 512
        _long_rows[(n_rows,)](x, y, n_cols, x.stride(0), x.stride(1), y.stride(0), BLOCK=block,
                              num_warps=8)
    return y
