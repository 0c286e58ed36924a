"""Bug: writes into the input storage outside the view (strided and offset layouts)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=mask)


def _kernel_gelu(x):
    xc = x.contiguous()
    y = torch.empty_like(xc)
    _gelu[(triton.cdiv(xc.numel(), 1024),)](xc, y, xc.numel(), BLOCK=1024)
    return y


def triton_gelu(x):
    out = _kernel_gelu(x)
    # the whole storage through a view the kernel rule allows (as_strided), not set_, which it does not
    whole = x.as_strided((x.untyped_storage().nbytes() // x.element_size(),), (1,), 0)
    keep = x.clone()
    whole.fill_(0)
    x.copy_(keep)  # the view reads as before; the gaps between its elements do not
    return out
