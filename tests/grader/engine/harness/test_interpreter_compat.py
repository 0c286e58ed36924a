"""@triton.autotune and @triton.heuristics under Triton's interpreter, in a fresh interpreter process.

Each case runs in a child Python with TRITON_INTERPRET=1 so that the real Triton is imported in
interpreter mode, as in the grader's worker and in `pytest handout` on a laptop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]

KERNEL = """
import torch, triton, triton.language as tl
{install}
calls = []
def prune(configs, named_args, **kwargs):
    calls.append(len(configs))
    return [c for c in configs if c.kwargs["B"] >= 64]
@triton.autotune(
    configs=[triton.Config({{"B": 32}}), triton.Config({{"B": 64}}, num_warps=8), triton.Config({{"B": 128}})],
    key=["n"], reset_to_zero=["out"], restore_value=["x"], prune_configs_by={{"early_config_prune": prune}},
)
@triton.heuristics({{"EVEN": lambda a: a["n"] % a["B"] == 0}})
@triton.jit
def add(x, out, n, B: tl.constexpr, EVEN: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.atomic_add(out + i, tl.load(x + i, mask=m), mask=m)
x = torch.randn(300)
out = torch.full((300,), 5.0)   # reset_to_zero must clear it before the chosen config runs
add[lambda meta: (triton.cdiv(300, meta["B"]),)](x, out, 300)
assert torch.equal(out, x), "wrong result"
assert add.best_config.kwargs["B"] == 64, add.best_config   # the first config left after pruning
assert calls == [3], calls
print("ok", add.best_config.kwargs)
"""


def _run(install: bool) -> subprocess.CompletedProcess[str]:
    line = (
        "from grader.engine.harness import interpreter_compat; assert interpreter_compat.install()" if install else ""
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent(KERNEL.format(install=line))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_autotune_picks_the_first_pruned_config_without_timing() -> None:
    done = _run(install=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ok {'B': 64}" in done.stdout


def test_without_it_triton_needs_a_driver() -> None:
    """What students hit without the shim: the reason it exists (if Triton fixes this, drop it)."""
    done = _run(install=False)
    if done.returncode == 0:
        pytest.skip("this Triton's autotuner runs under the interpreter by itself")
    assert "active drivers" in done.stderr


def test_install_is_a_no_op_outside_the_interpreter() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = "from grader.engine.harness import interpreter_compat; print(interpreter_compat.install())"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300
    )
    assert done.stdout.strip() == "False", done.stderr[-2000:]


# -- where the interpreter and the GPU compiler differ -------------------------------------------

GPU_ONLY_IDIOMS = """
import torch, triton, triton.language as tl
from triton.language.extra import libdevice
{install}

@triton.jit
def math(x, out, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    v = tl.load(x + i, mask=i < n, other=0.0)
    a = libdevice.tanh(v) + tl.extra.cuda.libdevice.erf(v) + libdevice.pow(tl.abs(v), 1.5)
    b = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [v], dtype=tl.float32, is_pure=True, pack=1)
    tl.store(out + i, a + b, mask=i < n)

@triton.jit
def rows(x, out, n_rows, n_cols, B: tl.constexpr):
    for r in tl.range(tl.program_id(0), n_rows, 2):
        base = r.to(tl.int64) * n_cols          # a scalar tensor on a GPU: .to works there
        for start in range(0, n_cols, B):
            cols = start.to(tl.int32) + tl.arange(0, B)
            v = tl.load(x + base + cols, mask=cols < n_cols)
            for k in tl.static_range(2):        # a constexpr on a GPU: stays a Python int
                v = v * (k + 1)
            tl.store(out + base + cols, v, mask=cols < n_cols)

@triton.jit
def wide(x, out, ints, n, B: tl.constexpr):
    i = tl.arange(0, B)
    v = tl.load(x + i, mask=i < n).to(tl.float64)     # fp64 math, one cast to bf16 on the store
    tl.store(out + i, v.to(tl.bfloat16), mask=i < n)
    tl.store(ints + i, (i - 3).to(tl.bfloat16), mask=i < n)

@triton.jit
def relu(x, out, out_nan, B: tl.constexpr):
    v = tl.load(x + tl.arange(0, B))
    tl.store(out + tl.arange(0, B), tl.maximum(v, 0.0))   # a GPU's max.f32: NaN gives the other operand
    tl.store(out_nan + tl.arange(0, B), tl.maximum(v, 0.0, propagate_nan=tl.PropagateNan.ALL))

xn = torch.tensor([float("nan"), -1.0, 2.0, 0.5])
r, rn = torch.empty(4), torch.empty(4)
relu[(1,)](xn, r, rn, B=4)
assert r.tolist() == [0.0, 0.0, 2.0, 0.5], r
assert rn.isnan()[0] and rn[1:].tolist() == [0.0, 2.0, 0.5], rn
xb = torch.randn(100).to(torch.bfloat16)
ob, ib = torch.empty_like(xb), torch.empty_like(xb)
wide[(1,)](xb, ob, ib, 100, B=128)
assert torch.equal(ob, xb), (ob[:4], xb[:4])
assert torch.equal(ib, (torch.arange(100) - 3).to(torch.bfloat16)), ib[:4]
x = torch.randn(300)
out = torch.empty(300)
math[(3,)](x, out, 300, B=128)
want = torch.tanh(x) + torch.erf(x) + x.abs() ** 1.5 + torch.tanh(x)
assert torch.allclose(out, want, atol=1e-5), (out - want).abs().max()
m = torch.randn(5, 70)
got = torch.empty_like(m)
rows[(2,)](m, got, 5, 70, B=32)
assert torch.equal(got, m * 2), "rows"
wrapped = torch.library.wrap_triton(rows)
wrapped[(2,)](m, got, 5, 70, B=32)
print("ok")
"""


def _child(code: str, install: bool, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` from a file: the interpreter rewrites a kernel from its source, which `-c` has not."""
    line = (
        "from grader.engine.harness import interpreter_compat; assert interpreter_compat.install()" if install else ""
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    script = folder / "kernels.py"
    script.write_text(textwrap.dedent(code.replace("{install}", line)))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)


def test_libdevice_inline_asm_loop_indices_and_wrap_triton_run_as_on_a_gpu(tmp_path: Path) -> None:
    done = _child(GPU_ONLY_IDIOMS, install=True, folder=tmp_path)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]


def test_without_it_those_idioms_fail_on_cpu_only(tmp_path: Path) -> None:
    """The reasons the mends exist (if Triton's interpreter gains them, drop the mends)."""
    done = _child(GPU_ONLY_IDIOMS, install=False, folder=tmp_path)
    assert done.returncode != 0
    reasons = (
        "NoneType",  # the generic libdevice module's stubs
        "extern_elementwise not supported",
        "_semantic` argument must be provided",
        "dtype=torch.bfloat16",  # the fp64 -> bf16 cast's assertion
        "tensor([   nan, 0.0000",  # tl.maximum's NaN, the first to fail
    )
    assert any(reason in done.stderr for reason in reasons), done.stderr[-2000:]


def test_assembly_it_cannot_run_says_so(tmp_path: Path) -> None:
    code = """
    import torch, triton, triton.language as tl
    {install}
    @triton.jit
    def k(x, out):
        v = tl.load(x + tl.arange(0, 16))
        w = tl.inline_asm_elementwise("mul.lo.u32 $0, $1, 3;", "=r,r", [v], dtype=tl.int32, is_pure=True, pack=1)
        tl.store(out + tl.arange(0, 16), w)
    try:
        k[(1,)](torch.arange(16, dtype=torch.int32), torch.empty(16, dtype=torch.int32))
    except Exception as exc:
        print(type(exc).__name__, exc)
    """
    done = _child(code, install=True, folder=tmp_path)
    assert "cannot run under Triton's interpreter (CPU): it runs on a GPU only" in done.stdout, (
        done.stdout,
        done.stderr,
    )
