"""Attack: the launch counter wraps Triton's `run` in a closure that keeps the original; this one
takes the original out of the closure and launches a real GeLU kernel through it (not counted, not
watched), then makes one counted token launch. What the hidden launch wrote changed with no launch
the grader saw."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    t = 2.0 * tl.sigmoid(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x)) - 1.0
    tl.store(y_ptr + offs, (0.5 * x * (1.0 + t)).to(y_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


_wrapped = type(_gelu).run
_original = next(
    c.cell_contents
    for c in (_wrapped.__closure__ or ())
    if callable(c.cell_contents) and getattr(c.cell_contents, "__name__", "") == "run"
)


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _original(_gelu, x, y, n, BLOCK=1024, grid=(triton.cdiv(n, 1024),), warmup=False)
    _token[(1,)](torch.zeros(1, device=x.device))
    return y
