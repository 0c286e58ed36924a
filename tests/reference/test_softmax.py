"""Unit tests of the reference softmax kernel (reference/softmax.py) against float64 PyTorch.

With a CUDA GPU the kernels run on it, in this process. Without one they run in Triton's CPU
interpreter, which must be switched on (TRITON_INTERPRET=1) before Triton is first imported; other
tests may already have imported it here, so the cases then run in one child process and this
module only checks what it reports.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import torch

from grader.engine.loading import load_file
from grader.engine.problems.softmax import softmax_definition

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
GPU = torch.cuda.is_available()
TOL = {torch.float32: (1e-6, 1e-5), torch.float16: (1e-4, 2e-3), torch.bfloat16: (1e-3, 1.6e-2)}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def load_reference():
    return load_file(ROOT / "reference" / "softmax.py")


def special_rows(n, dtype, g):
    """-inf rows, a leading run of -inf, a constant row, values ~1e4, every other -inf, a spike."""
    x = torch.randn(6, n, generator=g) * 3
    x[0] = float("-inf")
    x[1, : n - n // 8] = float("-inf")
    x[2] = 5.0
    x[3] = torch.randn(n, generator=g) * 1e4
    x[4, ::2] = float("-inf")
    x[5, n // 3] = 80.0
    return x.to(dtype)


def build_cases():
    """name -> (input tensor on CPU, how to call): 'api', ('split', block_n, target_programs) or
    ('one-pass' or 'one-pass-reread', chunk, spin_limit)."""
    g = torch.Generator().manual_seed(0)
    cases = {}
    for dt in DTYPES:
        d = str(dt).replace("torch.", "")
        for m, n in [(1, 1), (1, 7), (3, 5), (7, 1000), (64, 128), (2, 4096), (3, 40000)]:
            cases[f"{m}x{n}-{d}"] = ((torch.randn(m, n, generator=g) * 3).to(dt), "api")
        cases[f"special-short-{d}"] = (special_rows(300, dt, g), "api")
        cases[f"special-long-{d}"] = (special_rows(40000, dt, g), "api")
        # the long-row path with tiny tiles: several loop iterations and chunks per row
        cases[f"split-small-tiles-{d}"] = (special_rows(3000, dt, g), ("split", 128, 24))
        # the one-pass path with small chunks: groups of programs sharing rows; every wait cut
        # short (the interpreter, or a GPU where a group is not all resident) or none at all
        cases[f"one-pass-late-{d}"] = (special_rows(3000, dt, g), ("one-pass", 256, 0))
        cases[f"one-pass-{d}"] = (special_rows(3000, dt, g), ("one-pass", 256, None))
        cases[f"one-pass-many-rows-{d}"] = ((torch.randn(200, 1000, generator=g) * 3).to(dt), ("one-pass", 128, None))
        # the variant that reads its chunk again after the wait instead of keeping it
        cases[f"one-pass-reread-{d}"] = (special_rows(3000, dt, g), ("one-pass-reread", 256, None))
        cases[f"one-pass-reread-many-rows-{d}"] = (
            (torch.randn(200, 1000, generator=g) * 3).to(dt),
            ("one-pass-reread", 128, None),
        )
        cases[f"transposed-{d}"] = ((torch.randn(300, 50, generator=g)).to(dt).t(), "api")
        cases[f"row-slice-{d}"] = (torch.randn(40, 600, generator=g).to(dt)[::2, 5:405], "api")
        cases[f"col-stride-3-{d}"] = (torch.randn(9, 1500, generator=g).to(dt)[:, ::3], "api")
        cases[f"col-stride-3-long-{d}"] = (torch.randn(4, 120000, generator=g).to(dt)[:, ::3], "api")
    cases["1x1048576-float32"] = (torch.randn(1, 1 << 20, generator=g), "api")
    return cases


CASE_NAMES = list(build_cases())


def run_cases(device):
    """Run every case on `device`; returns name -> result dict (JSON-friendly)."""
    sm = load_reference()
    results = {}
    for name, (x, how) in build_cases().items():
        x = x.to(device)
        before = x.clone()
        if how == "api":
            y = sm.triton_softmax(x)
        elif how[0] == "split":
            y = torch.empty(x.shape, device=device, dtype=x.dtype)
            sm._split_launch(x, y, block_n=how[1], target_programs=how[2])
        else:
            y = torch.empty(x.shape, device=device, dtype=x.dtype)
            parts = -(-x.shape[1] // how[1])
            sm._one_pass_launch(x, y, parts, chunk=how[1], spin_limit=how[2], reread=how[0] == "one-pass-reread")
        ref = softmax_definition(x.double())
        atol, rtol = TOL[x.dtype]
        diff = (y.double() - ref).abs()
        bad = ~(diff <= atol + rtol * ref.abs())
        nan_match = torch.equal(torch.isnan(y), torch.isnan(ref))
        bad &= ~(torch.isnan(y) & torch.isnan(ref))
        results[name] = dict(
            max_abs_err=diff.nan_to_num(0.0).max().item(),
            n_bad=int(bad.sum()),
            nan_match=nan_match,
            dtype_ok=y.dtype == x.dtype,
            shape_ok=tuple(y.shape) == tuple(x.shape),
            input_untouched=torch.equal(before.nan_to_num(), x.nan_to_num()),
            new_tensor=y.data_ptr() != x.data_ptr(),
        )
    # errors and edge sizes
    raised = {}
    for label, arg in [
        ("1-D", torch.randn(5)),
        ("3-D", torch.randn(2, 3, 4)),
        ("int", torch.ones(3, 4, dtype=torch.int32)),
        ("list", [[1.0, 2.0]]),
    ]:
        try:
            sm.triton_softmax(arg.to(device) if isinstance(arg, torch.Tensor) else arg)
            raised[label] = False
        except ValueError:
            raised[label] = True
    empty = sm.triton_softmax(torch.randn(0, 5, device=device))
    results["_errors"] = dict(raised=raised, empty_shape=list(empty.shape))
    return results


@pytest.mark.parametrize("name", CASE_NAMES)
def test_softmax_matches_float64(results, name):
    r = results[name]
    assert r["dtype_ok"] and r["shape_ok"] and r["new_tensor"], r
    assert r["nan_match"], f"NaN positions differ from torch.softmax: {r}"
    assert r["n_bad"] == 0, f"{r['n_bad']} elements off, max abs err {r['max_abs_err']:.3e}"
    assert r["input_untouched"], "the input was modified"


def test_invalid_inputs_raise_and_empty_works(results):
    r = results["_errors"]
    assert all(r["raised"].values()), r["raised"]
    assert r["empty_shape"] == [0, 5]


if __name__ == "__main__":  # the child process of the CPU path
    warnings.simplefilter("ignore")
    import numpy as np

    np.seterr(all="ignore")  # -inf - -inf in padded rows is expected and never stored
    print(json.dumps(run_cases("cpu")))
