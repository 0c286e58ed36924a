"""GeLU with libdevice tanh. Dense tensors (any permutation of strides) are walked in storage
order straight into torch.empty_like; gappy views are copied with .contiguous() first."""
import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)
COEF = tl.constexpr(0.044715)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inner = SQRT_2_OVER_PI * (x + COEF * x * x * x)
    y = 0.5 * x * (1.0 + libdevice.tanh(inner))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _is_dense(t):
    # non-overlapping and dense: sorted strides form a packed layout
    if t.numel() <= 1:
        return True
    dims = sorted((s, d) for s, d in zip(t.stride(), t.shape) if d != 1)
    expected = 1
    for s, d in dims:
        if s != expected:
            return False
        expected *= d
    return True


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    src = x if _is_dense(x) else x.contiguous()
    out = torch.empty_like(src)
    n = src.numel()
    if n == 0:
        return out
    # empty_like of a dense tensor keeps its strides, so storage order matches element for element
    assert out.stride() == src.stride() or n == 1
    BLOCK = 1024 if x.is_cuda else 256
    grid = (triton.cdiv(n, BLOCK),)
    gelu_kernel[grid](src, out, n, BLOCK=BLOCK, num_warps=4)
    return out
