"""Attack (GPU): launch on a side stream and return without synchronising (events on the default stream time nothing)."""
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
_side = None


def triton_gelu(x):
    global _side
    _side = _side or torch.cuda.Stream()
    xc = x.contiguous()
    y = torch.empty_like(xc)
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        _gelu[(triton.cdiv(xc.numel(), 1024),)](xc, y, xc.numel(), BLOCK=1024)
    # keep both buffers alive for the side stream: the attack is on timing, its values are right
    xc.record_stream(_side)
    y.record_stream(_side)
    return y
