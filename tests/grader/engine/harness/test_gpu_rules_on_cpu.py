"""Under the interpreter: the GPU compiler's verdict, bfloat16 as the GPU computes it, memory bounds.

Each check runs in a child Python with TRITON_INTERPRET=1 (the real Triton imported in
interpreter mode, as in the worker and in `pytest handout` on a laptop), after the process
settings every submission gets (`student_runtime.prepare`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]

PRELUDE = """
import torch, triton, triton.language as tl
from grader.engine.harness import gpu_compile, student_runtime
student_runtime.prepare()
"""


def _run(tmp_path: Path, body: str) -> str:
    script = tmp_path / "kernels.py"  # @triton.jit needs a file to read the source from
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = {**os.environ, "TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_the_gpu_compiler_judges_each_launch(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        SCALE = 0.5

        @triton.jit
        def twice(x):
            return x * 2.0

        @triton.jit
        def good(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            tl.store(y_ptr + offs, twice(x) - tl.max(x, 0) + x.sum(0), mask=offs < n)

        @triton.jit
        def global_float(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * SCALE, mask=offs < n)

        x = torch.randn(100); y = torch.empty_like(x)
        for kernel in (good, global_float, good):  # a helper's call must leave triton.language as it was
            gpu_compile.start()
            kernel[(1,)](x, y, 100, BLOCK=128)
            (result,) = gpu_compile.taken()
            refused = "Cannot access global" in (result.error or "")
            print(result.kernel, result.error is None, result.shared_bytes, refused)
        gpu_compile.start(compile_only=True)
        big = torch.randn(1 << 20 | 1); out = torch.full_like(big, 7.0)
        good[(1,)](big, out, big.numel(), BLOCK=1 << 21)
        print("numel" in gpu_compile.taken()[0].error, bool((out == 7.0).all()))  # compiled, not run
        """,
    )
    lines = out.split("\n")
    assert lines[0].startswith("good True") and lines[2].startswith("good True"), out
    assert lines[1] == "global_float False None True", out
    assert lines[3] == "True True", out


def test_bfloat16_computes_as_the_gpu_does(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        @triton.jit
        def ops(x_ptr, y_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            m = offs < n
            x = tl.load(x_ptr + offs, mask=m)
            if OP == 0:
                y = x * x + x
            elif OP == 1:
                y = x * 0.5 + 1.0
            elif OP == 2:
                y = tl.where(x > 0, x, -float("inf"))
            else:
                y = x - tl.max(tl.where(m, x, -float("inf")), 0)
            tl.store(y_ptr + offs, y, mask=m)

        x = torch.randn(100).bfloat16()
        expected = [x * x + x, x * 0.5 + 1.0, torch.where(x > 0, x, -float("inf")), x - x.max()]
        for op, want in enumerate(expected):
            y = torch.empty_like(x)
            ops[(1,)](x, y, 100, OP=op, BLOCK=128)
            print(torch.equal(y, want))
        """,
    )
    assert out.split() == ["True"] * 4, out


def test_an_access_past_the_tensors_raises_with_a_hint(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        @triton.jit
        def nomask(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs))

        x = torch.randn(1000); y = torch.empty_like(x)
        try:
            nomask[(8,)](x, y, BLOCK=128)
        except Exception as exc:
            print(str(exc))
        x = torch.randn(1024); y = torch.empty_like(x)
        nomask[(8,)](x, y, BLOCK=128)
        print(torch.equal(y, x))
        """,
    )
    assert "tl.load in program (7, 0, 0)" in out and "unmasked tl.load/tl.store" in out, out
    assert out.strip().endswith("True"), out


def test_the_autotuner_skips_a_config_the_gpu_refuses_as_triton_does_there(tmp_path: Path) -> None:
    # Triton's matmul tutorial lists its biggest tiles first; on an H200 the autotuner scores a
    # config needing more shared memory than the GPU has as never fastest and uses another. Under
    # the interpreter (every config ranked equal) the first one used to be taken, and its compile
    # failed the call on a CPU that passes on the GPU.
    out = _run(
        tmp_path,
        """
        import math
        from grader.engine.harness import interpreter_compat

        def configs(*shapes):
            return [triton.Config({"BM": m, "BN": n, "BK": k}, num_stages=s, num_warps=4) for m, n, k, s in shapes]

        BIG, SMALL = (128, 256, 64, 3), (32, 32, 32, 2)

        def tuned(shapes):
            @triton.autotune(configs=configs(*shapes), key=["M", "N", "K"])
            @triton.jit
            def mm(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
                rm = tl.program_id(0) * BM + tl.arange(0, BM)
                rn = tl.program_id(1) * BN + tl.arange(0, BN)
                rk = tl.arange(0, BK)
                acc = tl.zeros((BM, BN), tl.float32)
                for k in range(0, tl.cdiv(K, BK)):
                    kk = k * BK + rk
                    ok = (rm[:, None] < M) & (kk[None, :] < K)
                    x = tl.load(a + rm[:, None] * K + kk[None, :], mask=ok, other=0.0)
                    ok = (kk[:, None] < K) & (rn[None, :] < N)
                    y = tl.load(b + kk[:, None] * N + rn[None, :], mask=ok, other=0.0)
                    acc = tl.dot(x, y, acc)
                tl.store(c + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
            return mm

        a, b = torch.randn(40, 24), torch.randn(24, 36)
        for shapes in ([BIG, SMALL], [SMALL, BIG], [BIG]):
            kernel = tuned(shapes)
            c = torch.zeros(40, 36)
            gpu_compile.start()
            grid = lambda meta: (triton.cdiv(40, meta["BM"]), triton.cdiv(36, meta["BN"]))
            kernel[grid](a, b, c, 40, 36, 24)
            picked = kernel.best_config.kwargs["BM"]
            refused = [r.shared_bytes for r in gpu_compile.taken() if gpu_compile.out_of_resources(r)]
            print(picked, bool(torch.allclose(c, a @ b, atol=1e-4)), refused)
        """,
    )
    big_first, small_first, big_only = out.strip().split("\n")
    assert big_first == "32 True []", out  # the GPU's pick: the big config is skipped, the call's record clean
    assert small_first == "32 True []", out
    picked, ran, refused = big_only.split(" ", 2)
    assert picked == "128" and refused != "[]", out  # nothing fits: the one config is used, and refused as on the GPU


def test_what_the_gpu_compiles_the_interpreter_runs_bools_and_math_methods(tmp_path: Path) -> None:
    # a bool passed to a parameter that is not a constexpr (a runtime branch on a GPU), and the
    # tl.math functions called as tensor methods (`x.exp2()`): the GPU compiles both, and Triton
    # 3.6's interpreter raised on both, a false zero on a CPU
    out = _run(
        tmp_path,
        """
        @triton.jit
        def scale(x_ptr, y_ptr, n, triple, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + offs, mask=offs < n)
            if triple:
                v = v * 3.0
            tl.store(y_ptr + offs, v, mask=offs < n)

        @triton.jit
        def methods(x_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            a = x.abs() + 1.0
            y = a.exp() + a.exp2() + a.log() + a.log2() + a.sqrt() + a.rsqrt() + x.erf() + x.floor() + x.sin()
            tl.store(y_ptr + offs, y)

        x = torch.randn(64)
        for flag in (True, False):
            y = torch.empty_like(x)
            gpu_compile.start()
            scale[(4,)](x, y, 64, flag, BLOCK=16)
            print("bool", flag, bool(torch.allclose(y, x * (3.0 if flag else 1.0))), gpu_compile.taken()[0].error)
        y = torch.empty_like(x)
        gpu_compile.start()
        methods[(1,)](x, y, BLOCK=64)
        a = x.abs() + 1.0
        want = a.exp() + a.exp2() + a.log() + a.log2() + a.sqrt() + a.rsqrt() + torch.erf(x) + x.floor() + x.sin()
        print("methods", bool(torch.allclose(y, want, rtol=1e-5, atol=1e-5)), gpu_compile.taken()[0].error)
        """,
    )
    assert out.split("\n")[:3] == ["bool True True None", "bool False True None", "methods True None"], out


def test_tensor_descriptors_clamp_and_more_libdevice_run_as_on_the_gpu(tmp_path: Path) -> None:
    # tensor descriptors' loads pass cache_modifier= by keyword, which the bounds check's wrapper
    # refused (a TypeError under the grader only); the GPU clamps with max then min (a NaN is
    # clamped, not kept); libdevice's normcdf, sinpi and remainder had no NumPy counterpart
    out = _run(
        tmp_path,
        """
        import math
        from triton.language.extra import libdevice

        triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8))

        @triton.jit
        def doubled(x_ptr, o_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
            pid = tl.program_id(0)
            xd = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
            od = tl.make_tensor_descriptor(o_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
            for j in range(0, tl.cdiv(N, BN)):
                od.store([pid * BM, j * BN], xd.load([pid * BM, j * BN]) * 2.0)

        @triton.jit
        def maths(x_ptr, c_ptr, y_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(c_ptr + offs, tl.clamp(x, 0.25, 0.5))
            tl.store(y_ptr + offs, libdevice.normcdf(x) + libdevice.sinpi(x) + libdevice.remainder(x, 0.75))

        x = torch.randn(40, 52); o = torch.zeros_like(x)
        gpu_compile.start()
        doubled[(3,)](x, o, 40, 52, BM=16, BN=16)
        print("descriptors", bool(torch.equal(o, 2 * x)), gpu_compile.taken()[0].error)
        x = torch.tensor([float("nan"), 0.1, 0.3, 0.9, -1.2, 2.0, -0.4, 1.3])
        c, y = torch.empty_like(x), torch.empty_like(x)
        gpu_compile.start()
        maths[(1,)](x, c, y, BLOCK=8)
        d = x.double()
        clamped = torch.where(torch.isnan(d), torch.full_like(d, 0.25), d.clamp(0.25, 0.5))
        want = 0.5 * torch.erfc(-d / math.sqrt(2.0)) + torch.sin(math.pi * d) + (d - torch.round(d / 0.75) * 0.75)
        same = torch.equal(c.double(), clamped) and torch.allclose(y[1:].double(), want[1:], atol=1e-5)
        print("maths", same, gpu_compile.taken()[0].error)
        """,
    )
    lines = out.strip().split("\n")
    assert lines[0] == "descriptors True None", out
    assert lines[1] == "maths True None", out


def test_a_builtin_of_the_submissions_own_is_refused_by_the_code_generator(tmp_path: Path) -> None:
    """A function marked `__triton_builtin__` outside Triton (the compiler calls it with a semantic, the
    interpreter without: it can differ between them) is refused where the code generator meets it;
    Triton's own builtins, and the grader's interpreter mends of them, are not."""
    out = _run(
        tmp_path,
        """
        from grader.engine.harness import kernel_rules

        def own(x, _semantic=None):
            return x

        own.__triton_builtin__ = True
        import functools

        @functools.wraps(tl.core.minimum)  # Triton's name, module, marker and __wrapped__; its own code
        def disguised(x, _semantic=None):
            return x

        print(kernel_rules.foreign_builtin(own), kernel_rules.foreign_builtin(tl.exp),
              kernel_rules.foreign_builtin(tl.math.ceil), kernel_rules.foreign_builtin(tl.core.builtin(own)),
              kernel_rules.foreign_builtin(disguised))

        @triton.jit
        def uses_own(x_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(x_ptr + offs, own(tl.load(x_ptr + offs)))

        gpu_compile.start()
        uses_own[(1,)](torch.zeros(16), BLOCK=16)
        (result,) = gpu_compile.taken()
        print("own is marked __triton_builtin__ but is not Triton's" in (result.error or ""))
        """,
    )
    assert out.split() == ["True", "False", "False", "True", "True", "True"], out


def test_a_kernel_may_name_only_triton_functions_as_the_gpus_hash_requires(tmp_path: Path) -> None:
    """Triton's hash of a kernel (taken first by every compile on a GPU) refuses a plain Python function
    named anywhere in its body, a branch that never runs included; the interpreter never takes it, so
    the CPU's compile check does, and the refusal holds for every specialization (Triton's placeholder
    hash let the second one through). A @triton.jit helper, named directly or through a module-level
    alias, passes."""
    out = _run(
        tmp_path,
        """
        from grader.engine.spec import gpu_limits

        def plain(x):
            return x

        @triton.jit
        def jitted(x):
            return x * 2.0

        alias = jitted

        @triton.jit
        def dead_branch(x_ptr, y_ptr, n, PLAIN: tl.constexpr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
            if PLAIN:
                y = plain(x)
            else:
                y = jitted(x)
            tl.store(y_ptr + offs, y, mask=offs < n)

        @triton.jit
        def direct(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, jitted(tl.load(x_ptr + offs, mask=offs < n, other=0.0)), mask=offs < n)

        @triton.jit
        def through_alias(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, alias(tl.load(x_ptr + offs, mask=offs < n, other=0.0)), mask=offs < n)

        for n in (100, 1):  # two specializations: the second compile must refuse it too
            x = torch.randn(n); y = torch.empty_like(x)
            gpu_compile.start()
            dead_branch[(1,)](x, y, n, PLAIN=False, BLOCK=128)
            (result,) = gpu_compile.taken()
            print("dead", bool(torch.equal(y, 2 * x)), result.error, gpu_limits.hint(result.error or "") is not None)
        for kernel in (direct, through_alias):
            x = torch.randn(100); y = torch.empty_like(x)
            gpu_compile.start()
            kernel[(1,)](x, y, 100, BLOCK=128)
            (result,) = gpu_compile.taken()
            print(result.kernel, bool(torch.equal(y, 2 * x)), result.error)
        """,
    )
    lines = out.strip().split("\n")
    refused = "RuntimeError: Unsupported function referenced: <function plain> True"
    assert lines[:2] == [f"dead True {refused}"] * 2, out  # it runs on a CPU: only the compile check refuses it
    assert lines[2:4] == ["direct True None", "through_alias True None"], out
