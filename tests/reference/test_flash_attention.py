"""Unit tests of the reference FlashAttention-2 (reference/flash_attention.py) against float64.

Each case checks O, the logsumexp L that forward saves for backward (found among the saved tensors
by shape and dtype, as the grader does), and dQ, dK, dV. With a CUDA GPU the kernels run on it,
in this process (bfloat16 included). Without one they run in Triton's CPU interpreter, in a child
process with TRITON_INTERPRET=1 (Triton reads it when it is first imported); there the cases are
float32 and float16 only, because the interpreter computes tl.dot on bfloat16 operands wrongly,
and they are small. They still cover every branch of the tiling: several key and query tiles per
program, ragged lengths (1, 17, ...), Nq != Nk both ways under the causal mask, transposed
(B, N, H, D) inputs and a non-unit stride along D, B * H > 1, both load paths (pointers and
tensor descriptors, which the interpreter emulates) and tiles with BLOCK_M < BLOCK_N and
BLOCK_M > BLOCK_N.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from grader.engine.loading import load_file
from grader.engine.problems.flash_attention import attention_definition, find_saved_lse

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPU = torch.cuda.is_available()
# elementwise |got - ref| <= atol + rtol * |ref|
TOL = {torch.float32: (2e-5, 2e-4), torch.float16: (3e-3, 1e-2), torch.bfloat16: (2.5e-2, 5e-2)}
LSE_ATOL = 2e-5
SMALL_TILES = {"fwd": (32, 16), "dkdv": (16, 32), "dq": (32, 16)}
OTHER_TILES = {"fwd": (16, 32), "dkdv": (32, 16), "dq": (16, 32)}

# name -> (B, H, Nq, Nk, D, causal, layout, dtype, tma, tiles)
BASE_CASES = {
    "ragged17-full": (1, 1, 17, 17, 16, False, "bhnd", "float32", False, SMALL_TILES),
    "ragged17-causal": (1, 1, 17, 17, 16, True, "bhnd", "float32", False, SMALL_TILES),
    "nq>nk-causal-bnhd": (2, 3, 70, 45, 32, True, "bnhd", "float32", False, SMALL_TILES),
    "nq<nk-causal": (2, 2, 45, 70, 32, True, "bhnd", "float16", False, SMALL_TILES),
    "nq1-full": (1, 2, 1, 33, 64, False, "bhnd", "float16", False, SMALL_TILES),
    "nk1-causal": (1, 2, 33, 1, 16, True, "bhnd", "float32", False, SMALL_TILES),
    "tma-causal": (2, 2, 64, 64, 64, True, "bhnd", "float16", True, SMALL_TILES),
    "tma-full-bnhd": (1, 2, 50, 37, 32, False, "bnhd", "float32", True, SMALL_TILES),
    "d-strided-causal": (1, 2, 30, 20, 16, True, "d_strided", "float32", False, SMALL_TILES),
    "other-tiles-causal": (1, 2, 70, 70, 16, True, "bhnd", "float32", False, OTHER_TILES),
    "d128-causal": (1, 1, 20, 20, 128, True, "bhnd", "float16", False, SMALL_TILES),
}


def gpu_cases():
    """On a GPU the same classes at a size where the real autotuned tiles are exercised."""
    cases = {}
    for dt in ("float32", "float16", "bfloat16"):
        cases[f"gpu-1000-causal-{dt}"] = (2, 2, 1000, 1000, 64, True, "bhnd", dt, None, None)
        cases[f"gpu-300x700-full-{dt}"] = (1, 2, 300, 700, 32, False, "bhnd", dt, None, None)
        cases[f"gpu-700x300-causal-bnhd-{dt}"] = (1, 3, 700, 300, 128, True, "bnhd", dt, None, None)
        cases[f"gpu-17-causal-d16-{dt}"] = (2, 3, 17, 17, 16, True, "bnhd", dt, None, None)
        cases[f"gpu-1-full-{dt}"] = (1, 1, 1, 1, 32, False, "bhnd", dt, None, None)
        cases[f"gpu-d-strided-{dt}"] = (1, 2, 200, 130, 64, True, "d_strided", dt, None, None)
    return cases


CASES = gpu_cases() if GPU else BASE_CASES


def load_reference():
    return load_file(ROOT / "reference" / "flash_attention.py")


def make_inputs(case, device, seed):
    b, h, nq, nk, d, causal, layout, dtype, _, _ = case
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)

    def make(n):
        if layout == "bnhd":  # (B, N, H, D) memory seen as (B, H, N, D)
            return torch.randn(b, n, h, d, generator=g).to(dt).to(device).transpose(1, 2)
        if layout == "d_strided":  # stride along D is N, not 1
            return torch.randn(b, h, d, n, generator=g).to(dt).to(device).transpose(2, 3)
        return torch.randn(b, h, n, d, generator=g).to(dt).to(device)

    q, k, v = make(nq), make(nk), make(nk)
    do = torch.randn(b, h, nq, d, generator=g).to(dt).to(device)
    return q, k, v, do


def run_case(fa, case, device, seed=0):
    b, h, nq, nk, d, causal, layout, dtype, tma, tiles = case
    if tiles is not None:
        fa.INTERPRETER_TILES = dict(tiles)
        fa.INTERPRETER_TMA = bool(tma)
    q, k, v, do = make_inputs(case, device, seed)
    qs, ks, vs = (t.detach().requires_grad_(True) for t in (q, k, v))
    o = fa.flash_attention(qs, ks, vs, is_causal=causal)
    lse = find_saved_lse(o, (b, h, nq))
    lse = lse.detach().clone() if lse is not None else None
    o.backward(do)
    return o.detach(), lse, qs.grad, ks.grad, vs.grad


def run_cases(device):
    """Run every case on `device`; returns name -> result dict (JSON-friendly)."""
    fa = load_reference()
    results = {}
    for name, case in CASES.items():
        b, h, nq, nk, d, causal, layout, dtype, tma, tiles = case
        q, k, v, do = make_inputs(case, device, seed=0)
        qr, kr, vr = (t.double().requires_grad_(True) for t in (q, k, v))
        o_ref, lse_ref = attention_definition(qr, kr, vr, causal)
        refs = (o_ref.detach(), lse_ref.detach(), *torch.autograd.grad(o_ref, (qr, kr, vr), do.double()))
        got = run_case(fa, case, device)
        atol, rtol = TOL[q.dtype]
        r = dict(
            o_dtype_ok=got[0].dtype == q.dtype,
            o_shape_ok=tuple(got[0].shape) == tuple(q.shape),
            lse_found=got[1] is not None,
            grad_dtypes_ok=all(g is not None and g.dtype == q.dtype for g in got[2:]),
        )
        for label, x, ref in zip(("O", "L", "dQ", "dK", "dV"), got, refs):
            if x is None:
                r[label] = dict(max_abs_err=None, n_bad=-1)
                continue
            diff = (x.double() - ref).abs()
            tol = LSE_ATOL if label == "L" else atol + rtol * ref.abs()
            r[label] = dict(max_abs_err=diff.max().item(), n_bad=int((~(diff <= tol)).sum()))
        results[name] = r
    # the backward pass has no atomics: the same inputs give bit-identical gradients
    first, second = (run_case(fa, CASES[next(iter(CASES))], device, seed=1) for _ in range(2))
    deterministic = all(torch.equal(a, b) for a, b in zip(first[2:], second[2:]))
    # forward alone, on tensors that need no gradient
    q, k, v, _ = make_inputs(CASES[next(iter(CASES))], device, seed=2)
    plain = fa.flash_attention(q, k, v)
    raised = {}
    x = torch.randn(1, 2, 8, 16, device=device)
    bad_calls = {
        "head dim 48": lambda: fa.flash_attention(*(torch.randn(1, 2, 8, 48, device=device),) * 3),
        "3-D input": lambda: fa.flash_attention(x[0], x[0], x[0]),
        "k/v shape mismatch": lambda: fa.flash_attention(x, x, torch.randn(1, 2, 9, 16, device=device)),
        "head count mismatch": lambda: fa.flash_attention(
            x, torch.randn(1, 3, 8, 16, device=device), torch.randn(1, 3, 8, 16, device=device)
        ),
        "dtype mismatch": lambda: fa.flash_attention(x, x.half(), x),
        "int dtype": lambda: fa.flash_attention(*(torch.ones(1, 1, 4, 16, dtype=torch.int32, device=device),) * 3),
        "empty sequence": lambda: fa.flash_attention(x, x[:, :, :0], x[:, :, :0]),
        "non-bool is_causal": lambda: fa.flash_attention(x, x, x, is_causal="yes"),
    }
    for label, call in bad_calls.items():
        try:
            call()
            raised[label] = False
        except ValueError:
            raised[label] = True
    results["_misc"] = dict(
        deterministic=deterministic, raised=raised, plain_forward_ok=bool(torch.isfinite(plain).all())
    )
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_flash_attention_matches_float64(results, name):
    r = results[name]
    assert r["o_dtype_ok"] and r["o_shape_ok"] and r["grad_dtypes_ok"], r
    assert r["lse_found"], "no float32 (B, H, Nq) tensor among the tensors saved for backward"
    for label in ("O", "L", "dQ", "dK", "dV"):
        assert r[label]["n_bad"] == 0, (
            f"{label}: {r[label]['n_bad']} elements out of tolerance, max abs err {r[label]['max_abs_err']}"
        )


def test_backward_is_deterministic(results):
    assert results["_misc"]["deterministic"]


def test_forward_without_grad(results):
    assert results["_misc"]["plain_forward_ok"]


def test_invalid_inputs_raise_value_error(results):
    raised = results["_misc"]["raised"]
    assert all(raised.values()), {k: v for k, v in raised.items() if not v}


if __name__ == "__main__":  # the child process of the CPU path
    warnings.simplefilter("ignore")
    print(json.dumps(run_cases("cpu")))
