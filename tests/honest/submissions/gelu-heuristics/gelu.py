"""GeLU (tanh approximation) with @triton.heuristics choosing the block size and warps.

The heuristics pick BLOCK_SIZE from the tensor size (tiny tensors don't need 4096-wide blocks)
and set EVEN_N when no tail mask is needed. Non-contiguous inputs get copied with .contiguous()
first (one extra pass, fine for now) -- with a warning so I remember it costs bandwidth.
"""

import warnings

import torch
import triton
import triton.language as tl

print("[gelu] loaded my heuristics GeLU")  # so I can see which version the tests import
_warned_copy = False


def _pick_block(args):
    n = args["n_elements"]
    return max(128, min(4096, triton.next_power_of_2(n)))


@triton.heuristics({
    "BLOCK_SIZE": _pick_block,
    "EVEN_N": lambda args: args["n_elements"] % _pick_block(args) == 0,
    "num_warps": lambda args: 8 if _pick_block(args) >= 2048 else 4,
})
@triton.jit
def _gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, EVEN_N: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK_SIZE
    offs = start + tl.arange(0, BLOCK_SIZE)
    if EVEN_N:
        x = tl.load(x_ptr + offs)
    else:
        x = tl.load(x_ptr + offs, mask=offs < n_elements)
    xf = x.to(tl.float32)
    u = 0.7978845608028654 * (xf + 0.044715 * xf * xf * xf)
    # tanh(|u|) = (1 - e^{-2|u|}) / (1 + e^{-2|u|}): never inf/inf; sign put back after
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(u < 0, -t, t)
    y = 0.5 * xf * (1.0 + t)
    if EVEN_N:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty))
    else:
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_elements)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    global _warned_copy
    if not x.is_contiguous():
        if not _warned_copy:
            warnings.warn(f"triton_gelu: copying a non-contiguous input (shape {tuple(x.shape)}, "
                          f"strides {x.stride()}) with .contiguous()")
            _warned_copy = True
        x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    _gelu_kernel[grid](x, y, n)
    return y
