"""FlashAttention-2, forward and backward: what a case may say (B, H, Nq, Nk, a head dimension, a
dtype, causal, layout), the float64 definition expected outputs come from (the one home of this
math: the reference kernel's tests and the attention benchmark import it), its inputs, the call
that collects O, the saved logsumexp and the gradients, the timed training step and the slice a
timed round checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, Literal

import torch
from pydantic import Field

from grader.engine.problems.base import TORCH_DTYPES, CallOutput, ProblemKind, Watch, pick
from grader.engine.problems.flash_attention.saved_lse import closest_lse, missing_lse_message, saved_lse_candidates
from grader.engine.problems.memory_estimate import Allocation, Estimate, gib
from grader.engine.spec.model import SHORT_DTYPE, Case, DType, with_layout_note


class AttentionCase(Case):
    b: int = Field(ge=1)
    h: int = Field(ge=1)
    nq: int = Field(ge=1)
    nk: int = Field(ge=1)
    d: Literal[16, 32, 64, 128]
    dtype: DType
    causal: bool = False
    #: "bnhd": q, k, v are (B, H, N, D) views of (B, N, H, D) memory, as after a head split
    layout: Literal["contiguous", "bnhd"] = "contiguous"

    def describe(self) -> str:
        seq = f"N={self.nq}" if self.nq == self.nk else f"Nq={self.nq} Nk={self.nk}"
        text = f"B={self.b} H={self.h} {seq} D={self.d} {SHORT_DTYPE[self.dtype]}" + (" causal" if self.causal else "")
        return with_layout_note(text, self.layout)


def attention_definition(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax(q k^T / sqrt(D)) v and the natural-log logsumexp of each row of scaled scores.

    Causal is top-left aligned: query i sees keys j <= i.
    """
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        nq, nk = scores.shape[-2:]
        hidden = torch.ones(nq, nk, dtype=torch.bool, device=q.device).triu(diagonal=1)
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse.unsqueeze(-1)) @ v, lse


#: where a student over the memory budget reads how to fit it
MEMORY_WRITEUP = "the write-up's section on the memory budget (assignment/README.md, 4. FlashAttention-2)"


def score_matrices(case: AttentionCase, at_peak: tuple[Allocation, ...]) -> list[Allocation]:
    """The allocations live at the peak whose last two dimensions are Nq x Nk (or Nk x Nq): what
    usually breaks the memory budget (S, P, dP, dS held for many heads at once)."""
    square = {(case.nq, case.nk), (case.nk, case.nq)}
    return [a for a in at_peak if len(a.shape) >= 2 and tuple(a.shape[-2:]) in square and a.dtype != "bool"]


def over_budget_hint(case: Case, result: Estimate) -> str:
    """Why a FlashAttention call is over its budget, in the student's terms (the estimate itself is
    the generic one of grader/engine/problems/memory_estimate.py)."""
    assert isinstance(case, AttentionCase)
    matrices = score_matrices(case, result.at_peak)
    if not matrices:
        return f"what is live at the peak: {result.largest()}; see {MEMORY_WRITEUP}"
    held = sum(a.nbytes for a in matrices)
    return (
        f"your backward holds {len(matrices)} Nq x Nk score matrices (S, P, dP, dS) at once, {gib(held)} of "
        f"the peak: {result.largest()}. Recompute P from L tile by tile (a Triton backward holds none), or "
        f"overwrite in place (P in S's memory, dS in dP's) and loop over fewer heads at a time; see {MEMORY_WRITEUP}"
    )


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
