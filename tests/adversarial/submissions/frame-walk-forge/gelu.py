"""Known hole (docs/defenses.md): reach the harness module through frames and blind its op summary."""
import sys
import torch
import triton
import triton.language as tl


@triton.jit
def _token(p):
    tl.store(p, tl.load(p))


def _blind_harness():
    frame = sys._getframe(1)
    while frame is not None:
        g = frame.f_globals
        if "GUARD" in g and "PROFILER" in g:
            real = sorted
            g["sorted"] = lambda items, *a, **k: [i for i in real(items, *a, **k) if not str(i).startswith("aten::")]
            return
        frame = frame.f_back


def triton_gelu(x):
    _blind_harness()
    _token[(1,)](torch.zeros(1, device=x.device))
    return torch.nn.functional.gelu(x, approximate="tanh")
