"""FlashAttention-2, forward and backward: its inputs, the call that collects O, the saved logsumexp
and the gradients, the timed training step and the slice a timed round checks."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from grader.engine.problems.base import TORCH_DTYPES, CallOutput, ProblemKind, Watch, pick
from grader.engine.problems.flash_attention.case import AttentionCase
from grader.engine.problems.flash_attention.definition import attention_definition
from grader.engine.problems.flash_attention.memory_estimate import over_budget_hint
from grader.engine.problems.flash_attention.saved_lse import closest_lse, missing_lse_message, saved_lse_candidates
from grader.engine.spec.model import Case


class FlashAttention(ProblemKind):
    name = "flash_attention"
    case_model = AttentionCase
    output_names = ("o", "lse", "dq", "dk", "dv")
    output_dtypes = {"lse": "float32"}
    uses_dot = True

    def make_inputs(self, case: Case, gen: torch.Generator) -> dict[str, Any]:
        assert isinstance(case, AttentionCase)
        dtype = TORCH_DTYPES[case.dtype]

        def make(n: int) -> torch.Tensor:
            if case.layout == "bnhd":
                return (
                    torch.randn(case.b, n, case.h, case.d, generator=gen, device=gen.device).to(dtype).transpose(1, 2)
                )
            return torch.randn(case.b, case.h, n, case.d, generator=gen, device=gen.device).to(dtype)

        return {
            "q": make(case.nq),
            "k": make(case.nk),
            "v": make(case.nk),
            "grad_out": torch.randn(case.b, case.h, case.nq, case.d, generator=gen, device=gen.device).to(dtype),
            "is_causal": case.causal,
        }

    def expected(self, inputs: dict[str, Any], case: Case) -> dict[str, torch.Tensor]:
        q, k, v = (inputs[n].double().requires_grad_(True) for n in ("q", "k", "v"))
        with torch.enable_grad():
            o, lse = attention_definition(q, k, v, inputs["is_causal"])
            dq, dk, dv = torch.autograd.grad(o, (q, k, v), inputs["grad_out"].double())
        return {"o": o.detach(), "lse": lse.detach(), "dq": dq, "dk": dk, "dv": dv}

    def call(
        self, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, watch: Watch = nullcontext
    ) -> CallOutput:
        q, k, v = (inputs[n].detach().requires_grad_(True) for n in ("q", "k", "v"))
        with torch.enable_grad():
            with watch():
                out = fn(q, k, v, inputs["is_causal"])  # positional: `flash_attention = MyFunction.apply` works too
                # the saved tensors are read inside the watch: code that runs when they are read (a
                # saved-tensor unpack hook, say) is watched as the forward is (O's values are those
                # `fn` returned, copied as it returned: grader.engine.harness.calls)
                candidates: list[torch.Tensor] = []
                missing = ""
                if isinstance(out, torch.Tensor):
                    candidates = [t.detach().clone() for t in saved_lse_candidates(out, tuple(q.shape[:3]))]
                    missing = "" if candidates else missing_lse_message(out, tuple(q.shape[:3]))
            if not isinstance(out, torch.Tensor):
                return CallOutput({"o": out}, {"o": "flash_attention did not return a tensor; backward not run"})
            lse = closest_lse(candidates, q.detach(), k.detach(), bool(inputs["is_causal"]))
            notes = {} if lse is not None else {"lse": missing}
            if out.grad_fn is None:
                return CallOutput(
                    {"o": out.detach(), "lse": lse},
                    {**notes, "dq": "the output has no grad_fn: backward is not connected"},
                )
            out.backward(inputs["grad_out"])
        return CallOutput({"o": out.detach(), "lse": lse, "dq": q.grad, "dk": k.grad, "dv": v.grad}, notes)

    def timed(self, fn: Callable[..., Any], inputs: dict[str, Any]) -> Callable[[], Any]:
        """Forward and backward together: what training pays for."""
        q, k, v = (inputs[n].detach().requires_grad_(True) for n in ("q", "k", "v"))
        grad_out, causal = inputs["grad_out"], inputs["is_causal"]

        def step() -> Any:
            with torch.enable_grad():
                out = fn(q, k, v, causal)
                return (out, *torch.autograd.grad(out, (q, k, v), grad_out))

        return step

    timed_names = ("o", "dq", "dk", "dv")

    def refill(self, inputs: dict[str, Any], case: Case, gen: torch.Generator) -> None:
        for name in ("q", "k", "v", "grad_out"):
            inputs[name].normal_(generator=gen)

    def sample(self, case: Case, gen: torch.Generator) -> dict[str, torch.Tensor]:
        """One (batch, head) slice, checked on some of its query rows and key rows.

        The slice's float64 forward and backward are recomputed whole (dk and dv sum over every
        query), so the rows sent back can be few.
        """
        assert isinstance(case, AttentionCase)
        return {
            "b": pick(gen, case.b, 1),
            "h": pick(gen, case.h, 1),
            "rows_q": pick(gen, case.nq, 64),
            "rows_k": pick(gen, case.nk, 64),
        }

    def output_shape(self, output: str, case: Case) -> tuple[int, ...]:
        assert isinstance(case, AttentionCase)
        return (case.b, case.h, case.nk if output in ("dk", "dv") else case.nq, case.d)

    def take(
        self, outputs: dict[str, torch.Tensor], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        b, h = plan["b"], plan["h"]
        return {
            name: outputs[name][b, h][0][plan["rows_q" if name in ("o", "dq") else "rows_k"]]
            for name in self.timed_names
        }

    def expected_sample(
        self, inputs: dict[str, Any], case: Case, plan: dict[str, torch.Tensor]
    ) -> dict[str, torch.Tensor]:
        b, h = plan["b"], plan["h"]
        head = {name: inputs[name][b, h].unsqueeze(0) for name in ("q", "k", "v", "grad_out")}
        full = self.expected({**head, "is_causal": inputs["is_causal"]}, case)
        return {
            name: full[name][0, 0][plan["rows_q" if name in ("o", "dq") else "rows_k"]] for name in self.timed_names
        }

    def pytorch(self, inputs: dict[str, Any]) -> Callable[[], Any]:
        sdpa = torch.nn.functional.scaled_dot_product_attention
        return self.timed(lambda q, k, v, is_causal: sdpa(q, k, v, is_causal=is_causal), inputs)

    def memory_hint(self, case: Case, estimate: Any) -> str:
        return over_budget_hint(case, estimate)

    def work(self, case: Case) -> tuple[float, float]:
        assert isinstance(case, AttentionCase)
        size = TORCH_DTYPES[case.dtype].itemsize
        tensors = case.b * case.h * case.d * (2 * case.nq + 2 * case.nk)
        flops = 4.0 * case.b * case.h * case.nq * case.nk * case.d * 3.5
        if case.causal:
            flops /= 2
        return float(tensors * size), flops
