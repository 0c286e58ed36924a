"""Unit tests of the reference matmul kernels (reference/matmul.py) against float64 PyTorch.

With a CUDA GPU the kernels run on it, in this process (bfloat16 included). Without one they run
in Triton's CPU interpreter, in a child process with TRITON_INTERPRET=1 (Triton reads it when it
is first imported); there the cases are float32 and float16 only, because the interpreter
computes tl.dot on bfloat16 operands wrongly (a known upstream limitation). On CPU the Hopper
(TMA) kernel is also run through the interpreter with small tiles, so its persistent loop,
grouped ordering, edge handling and split epilogue are tested without a GPU.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from grader.engine.loading import load_file
from grader.engine.problems.matmul import matmul_definition

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPU = torch.cuda.is_available()
# bound on max|c - ref| / max|ref|: float32 runs 3xTF32, about float32 rounding
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DTYPES = (torch.float32, torch.float16) + ((torch.bfloat16,) if GPU else ())
SHAPES = [(1, 1, 1), (32, 32, 32), (100, 77, 33), (1, 50, 70), (50, 1, 70), (70, 50, 1), (129, 65, 200)]
TMA_SHAPES = [(100, 72, 40), (129, 200, 72), (1, 8, 8), (64, 64, 64)]  # 16-byte aligned rows


def load_reference():
    return load_file(ROOT / "reference" / "matmul.py")


def build_cases():
    """name -> (a, b, activation, kernel), kernel 'api' or 'tma' (the Hopper kernel, forced)."""
    g = torch.Generator().manual_seed(0)

    def rnd(*shape, dtype):
        return torch.randn(*shape, generator=g).to(dtype)

    cases = {}
    for dt in DTYPES:
        d = str(dt).replace("torch.", "")
        for act in (None, "gelu"):
            for m, n, k in SHAPES:
                cases[f"{m}x{n}x{k}-{d}-{act}"] = (rnd(m, k, dtype=dt), rnd(k, n, dtype=dt), act, "api")
            cases[f"transposed-{d}-{act}"] = (rnd(60, 90, dtype=dt).t(), rnd(70, 60, dtype=dt).t(), act, "api")
            cases[f"sliced-{d}-{act}"] = (rnd(90, 200, dtype=dt)[::2, ::3], rnd(67, 100, dtype=dt)[:, 1::2], act, "api")
            for m, n, k in TMA_SHAPES:
                cases[f"tma-{m}x{n}x{k}-{d}-{act}"] = (rnd(m, k, dtype=dt), rnd(k, n, dtype=dt), act, "tma")
    # extreme accumulator values through the GeLU epilogue (K = 1: c = a * b exactly)
    x = torch.cat([torch.linspace(-12, 12, 201), torch.tensor([-1e4, -60.0, 0.0, 60.0, 1e4])])
    cases["gelu-extremes-float32"] = (x[:, None], torch.ones(1, 3), "gelu", "api")
    return cases


CASE_NAMES = list(build_cases())


def launch_tma_small(mm, a, b, c, fuse_gelu):
    """The Hopper kernel with small tiles and fewer programs than tiles (persistent loop)."""
    import triton

    M, K = a.shape
    N = b.shape[1]
    meta = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, SPLIT_EPILOGUE=fuse_gelu)
    tiles = triton.cdiv(M, 32) * triton.cdiv(N, 32)
    if a.is_cuda:
        triton.set_allocator(mm._tma_allocator)
    mm._matmul_tma_kernel[(max(1, tiles // 3),)](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        b.stride(0),
        c.stride(0),
        FUSE_GELU=fuse_gelu,
        PRECISION="tf32x3" if a.dtype == torch.float32 else "tf32",
        **meta,
    )


def run_cases(device):
    mm = load_reference()
    results = {}
    tma_ok = device == "cpu" or torch.cuda.get_device_capability()[0] >= 9
    for name, (a, b, act, kernel) in build_cases().items():
        if kernel == "tma" and not tma_ok:
            continue
        a, b = a.to(device), b.to(device)
        a0, b0 = a.clone(), b.clone()
        if kernel == "api":
            c = mm.triton_matmul(a, b, act)
        else:
            c = torch.full((a.shape[0], b.shape[1]), float("nan"), device=device, dtype=a.dtype)
            launch_tma_small(mm, a, b, c, act == "gelu")
        ref = matmul_definition(a.double(), b.double(), act)
        err = (c.double() - ref).abs().max().item()
        results[name] = dict(
            rel_err=err / max(ref.abs().max().item(), 1e-30),
            max_abs_err=err,
            tol=TOL[a.dtype],
            any_nan=bool(torch.isnan(c).any()),
            dtype_ok=c.dtype == a.dtype,
            shape_ok=tuple(c.shape) == tuple(ref.shape),
            inputs_untouched=torch.equal(a, a0) and torch.equal(b, b0),
        )
    raised = {}
    h = dict(device=device, dtype=torch.float16)
    bad_calls = {
        "inner dims": lambda: mm.triton_matmul(torch.ones(4, 5, **h), torch.ones(6, 4, **h)),
        "dtypes": lambda: mm.triton_matmul(torch.ones(4, 5, **h), torch.ones(5, 4, device=device)),
        "activation": lambda: mm.triton_matmul(torch.ones(4, 5, **h), torch.ones(5, 4, **h), "relu"),
        "1-D": lambda: mm.triton_matmul(torch.ones(5, **h), torch.ones(5, 4, **h)),
        "int": lambda: mm.triton_matmul(
            torch.ones(4, 5, device=device, dtype=torch.int32), torch.ones(5, 4, device=device, dtype=torch.int32)
        ),
    }
    for label, call in bad_calls.items():
        try:
            call()
            raised[label] = False
        except ValueError:
            raised[label] = True
    empty = mm.triton_matmul(torch.ones(0, 5, **h), torch.ones(5, 3, **h))
    zero_k = mm.triton_matmul(torch.ones(4, 0, **h), torch.ones(0, 3, **h))
    results["_errors"] = dict(
        raised=raised,
        empty_shape=list(empty.shape),
        zero_k_is_zero=bool((zero_k == 0).all()) and zero_k.shape == (4, 3),
    )
    return results


@pytest.mark.parametrize("name", CASE_NAMES)
def test_matmul_matches_float64(results, name):
    if name not in results:
        pytest.skip("the TMA kernel needs a Hopper GPU (or the CPU interpreter)")
    r = results[name]
    assert r["dtype_ok"] and r["shape_ok"], r
    assert not r["any_nan"], "NaN in the output (an element left unwritten?)"
    assert r["rel_err"] <= r["tol"], f"max abs err / max |ref| = {r['rel_err']:.3e} > {r['tol']}"
    assert r["inputs_untouched"], "an input was modified"


def test_invalid_inputs_raise_and_edge_sizes_work(results):
    r = results["_errors"]
    assert all(r["raised"].values()), r["raised"]
    assert r["empty_shape"] == [0, 3]
    assert r["zero_k_is_zero"]


if __name__ == "__main__":  # the child process of the CPU path
    warnings.simplefilter("ignore")
    import numpy as np

    np.seterr(all="ignore")  # exp overflow in the GeLU of very negative values is expected
    print(json.dumps(run_cases("cpu")))
