"""Attack: a token Triton launch, then GeLU by an NNC tensor expression (`torch._C._te`, TorchScript's
tensor-expression compiler) built and run by its code generator directly: no fused group, no aten
op, nothing the profiler records. With KERNEL = True an NNC `TensorExprKernel` compiled from a
TorchScript graph of `aten::gelu` runs it instead. Its honest twin (CHEAT = False) returns the
Triton kernel's output."""

import torch
from correct_gelu import triton_gelu as _correct

CHEAT = True
KERNEL = False
te = torch._C._te
_GRAPH = """graph(%x : Float({n}, strides=[1], requires_grad=0, device=cpu)):
  %a : str = prim::Constant[value="tanh"]()
  %y : Float({n}, strides=[1], requires_grad=0, device=cpu) = aten::gelu(%x, %a)
  return (%y)"""


def _codegen(n: int):  # noqa: ANN202 - an NNC code generator
    size = te.ExprHandle.int(n)
    x = te.BufHandle("X", [size], torch.float32)
    c = te.ExprHandle.float

    def body(i):  # noqa: ANN001, ANN202
        v = x.load([i])
        return c(0.5) * v * (c(1.0) + te.tanh(c(0.7978845608028654) * (v + c(0.044715) * v * v * v)))

    y = te.Compute("Y", [size], body)
    loops = te.LoopNest([y])
    loops.prepare_for_codegen()
    return te.construct_codegen("ir_eval", te.simplify(loops.root_stmt()), [x, y])


def triton_gelu(x: torch.Tensor) -> torch.Tensor:
    y = _correct(x)
    if not CHEAT or x.device.type != "cpu":
        return y
    flat = x.float().contiguous().reshape(-1)
    if KERNEL:
        torch._C._jit_set_te_must_use_llvm_cpu(False)
        out = te.TensorExprKernel(torch._C.parse_ir(_GRAPH.format(n=flat.numel()))).run((flat,))
        return out.reshape(x.shape).to(x.dtype)
    out = torch.empty_like(flat)
    _codegen(flat.numel()).call([flat, out])
    return out.reshape(x.shape).to(x.dtype)
