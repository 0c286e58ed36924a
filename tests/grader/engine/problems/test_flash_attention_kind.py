"""How the grader calls a FlashAttention-2 submission (`grader.engine.problems.flash_attention.kind`)."""

from __future__ import annotations

from typing import Any

import torch

from grader.engine.problems import REGISTRY
from grader.engine.problems.flash_attention.kind import attention_definition

KIND = REGISTRY["flash_attention"]


class Attention(torch.autograd.Function):
    """A CS336-style Function computed with PyTorch (the kernel rule is not this test's)."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
        o, lse = attention_definition(q.double(), k.double(), v.double(), is_causal)
        ctx.save_for_backward(q, k, v, lse.float())
        ctx.is_causal = is_causal
        return o.to(q.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        q, k, v, _ = ctx.saved_tensors
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
            o, _ = attention_definition(q, k, v, ctx.is_causal)
            return (*torch.autograd.grad(o, (q, k, v), grad), None)


def test_a_functions_apply_can_stand_for_flash_attention() -> None:
    """`flash_attention = MyFunction.apply` takes no keyword arguments: is_causal goes positionally."""
    case = KIND.case_model.model_validate(
        {"name": "t", "suite": "cpu", "b": 1, "h": 2, "nq": 16, "nk": 16, "d": 16, "dtype": "float32", "causal": True}
    )
    inputs = KIND.make_inputs(case, torch.Generator().manual_seed(0))
    got = KIND.call(Attention.apply, inputs, case)
    expected = KIND.expected(inputs, case)
    assert not got.notes, got.notes
    for name in ("o", "lse", "dq", "dk", "dv"):
        assert torch.allclose(got.outputs[name].double(), expected[name], atol=1e-4), name
