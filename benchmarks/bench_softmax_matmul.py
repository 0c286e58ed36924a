"""Check and time the reference softmax and matmul kernels against PyTorch on one CUDA GPU.

    python benchmarks/bench_softmax_matmul.py                 # checks + side-by-side table
    python benchmarks/bench_softmax_matmul.py --skip-checks   # the table only
    python benchmarks/bench_softmax_matmul.py --only softmax --sweep softmax   # one kernel's checks, sweeps, table
    python benchmarks/bench_softmax_matmul.py --sweep [softmax|matmul] --no-final
                                     # the tuning sweeps behind the kernels' heuristics

Correctness first (float64 references, every output element checked), then timings with
``triton.testing.do_bench`` (median; it flushes L2 before every run). Softmax and GeLU are
reported in GB/s counting one read and one write of the tensor; matmul in TFLOP/s = 2MNK / time.
PyTorch is timed in the same run on the same GPU (eager, and compiled by ``torch.compile`` unless
``--no-compile``), with a device copy of the same bytes beside every memory-bound row, and the
targets are issue 32's: softmax >= PyTorch and >= 85% of the copy, matmul >= 0.95x cuBLAS on
every shape (a ragged one included), the fused GeLU epilogue >= the unfused pair. The table
is printed as markdown and, when $OUT is set, written to $OUT/softmax_matmul.md. If
reference/gelu.py exists, its kernel is timed too (against torch's GeLU and a device copy).
"""

import argparse
import itertools
import os
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
from triton.testing import do_bench

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from grader.engine.loading import load_file  # noqa: E402

T0 = time.time()
LOG = []


def log(*args):
    line = " ".join(str(a) for a in args)
    LOG.append(line)
    print(f"[{time.time() - T0:6.1f}s] {line}", flush=True)
    if os.environ.get("OUT"):
        with open(Path(os.environ["OUT"], "softmax_matmul.log"), "a") as f:
            f.write(f"[{time.time() - T0:6.1f}s] {line}\n")


def load(name):
    path = ROOT / "reference" / f"{name}.py"
    if not path.exists():
        return None
    return load_file(path)


def bench(fn, rep=100):
    return do_bench(fn, warmup=25, rep=rep, return_mode="median")


def gbs(nbytes, ms):
    return nbytes / ms / 1e6


def tflops(flops, ms):
    return flops / ms / 1e9


def fmt(v, nd=0):
    return "-" if v is None else f"{v:,.{nd}f}"


# ------------------------------------------------------------------------------------------------
# correctness


def spec_tolerances():
    """The per-dtype (atol, rtol) of assignment.toml, to report how close we are to them."""
    path = ROOT / "assignment" / "assignment.toml"
    try:
        import tomllib

        spec = tomllib.loads(path.read_text())
    except Exception:  # noqa: BLE001
        return {}
    out = {}
    for p in spec.get("problems", []):
        tol = p.get("tolerance", {}).get("default", {})
        out[p["name"]] = {getattr(torch, k): (v["atol"], v["rtol"]) for k, v in tol.items()}
    return out


class ErrorStats:
    """Worst errors per (dtype, label) against float64, and against the spec's tolerance."""

    def __init__(self, spec_tol):
        self.spec_tol = spec_tol
        self.worst = {}

    def add(self, key, dtype, out, ref):
        diff = (out.double() - ref).abs().nan_to_num(0.0)
        abs_err = diff.max().item()
        rel_to_max = abs_err / max(ref.abs().nan_to_num(0.0).max().item(), 1e-30)
        spec = float("nan")
        if dtype in self.spec_tol:
            atol, rtol = self.spec_tol[dtype]
            spec = (diff / (atol + rtol * ref.abs().nan_to_num(0.0))).max().item()
        w = self.worst.setdefault(key, [0.0, 0.0, 0.0])
        w[0], w[1] = max(w[0], abs_err), max(w[1], rel_to_max)
        w[2] = max(w[2], spec) if spec == spec else w[2]
        return abs_err, rel_to_max, spec

    def report(self, what):
        for key, (e, r, sp) in self.worst.items():
            log(
                f"  {what} {key}: max abs err {e:.3e}, max abs err / max|ref| {r:.3e}, "
                f"worst |err| / (atol + rtol |ref|) under assignment.toml {sp:.3f}"
            )


def softmax_cases(dev):
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, dtype=torch.float32, scale=3.0):
        return (torch.randn(*shape, generator=g, device=dev) * scale).to(dtype)

    cases = []
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        for M, N in [
            (1, 1),
            (1, 7),
            (37, 1000),
            (256, 128),
            (64, 4096),
            (8, 32768),
            (4, 32769),
            (3, 100_003),
            (2, 1 << 20),
            (1000, 777),
        ]:
            cases.append((f"{M}x{N}", rnd(M, N, dtype=dt)))
        for n in (3000, 70000):
            x = rnd(6, n, dtype=dt)
            x[0] = float("-inf")
            x[1, : n - 500] = float("-inf")
            x[2] = 5.0
            x[3] = rnd(n, scale=1e4).to(dt)
            x[4, ::2] = float("-inf")
            x[5, 1000] = 80.0
            cases.append((f"special rows, N={n}", x))
        cases.append(("transposed 300x50", rnd(50, 300, dtype=dt).t()))
        cases.append(("col stride 3, long", rnd(16, 150000, dtype=dt)[:, ::3]))
        cases.append(("row slice", rnd(64, 2000, dtype=dt)[::2, 7:1507]))
    return cases


def check_softmax(sm, dev, spec_tol):
    tol = {torch.float32: 2e-6, torch.float16: 1e-3, torch.bfloat16: 8e-3}
    stats = ErrorStats(spec_tol.get("softmax", {}))
    ok_all = True
    for name, x in softmax_cases(dev):
        x_before = x.clone()
        y = sm.triton_softmax(x)
        ref = torch.softmax(x.double(), dim=-1)
        nan_ok = torch.equal(torch.isnan(y), torch.isnan(ref))
        err, _, _ = stats.add(str(x.dtype).replace("torch.", ""), x.dtype, y, ref)
        ok = nan_ok and err <= tol[x.dtype] and y.dtype == x.dtype and y.shape == x.shape and torch.equal(x, x_before)
        ok_all &= ok
        if not ok:
            log(f"  SOFTMAX FAIL {name} {x.dtype}: max abs err {err:.3e}, NaN match {nan_ok}")
    stats.report("softmax")
    return ok_all


def launch_tma_small(mm, a, b, c, fuse_gelu):
    """The Hopper kernel with small tiles and a third as many programs as tiles (persistent)."""
    M, K = a.shape
    N = b.shape[1]
    tiles = triton.cdiv(M, 32) * triton.cdiv(N, 32)
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
        BLOCK_M=32,
        BLOCK_N=32,
        BLOCK_K=16,
        GROUP_M=2,
        FUSE_GELU=fuse_gelu,
        SPLIT_EPILOGUE=fuse_gelu,
        PRECISION="tf32x3" if a.dtype == torch.float32 else "tf32",
    )


def check_matmul(mm, dev, spec_tol):
    g = torch.Generator(device=dev).manual_seed(1)
    tol = {torch.float32: 2e-5, torch.float16: 3e-3, torch.bfloat16: 2e-2}  # on err / max|ref|
    stats = ErrorStats(spec_tol.get("matmul", {}))
    ok_all = True

    def rnd(*shape, dtype):
        return torch.randn(*shape, generator=g, device=dev).to(dtype)

    # (name, a, b, activation, kernel): kernel None = through triton_matmul's own dispatch (and
    # autotuning, which compiles every configuration: hence few float16/float32 cases), "tma" =
    # the Hopper kernel forced, with one small fixed configuration.
    cases = []
    for dt in (torch.bfloat16, torch.float16, torch.float32):
        shapes = [(1000, 777, 333), (1, 512, 256), (300, 200, 1)]
        if dt == torch.bfloat16:
            shapes += [(512, 1, 256), (640, 1024, 4000), (256, 256, 256), (4096, 64, 512), (200, 1024, 100)]
        for M, N, K in shapes:
            cases.append((f"{M}x{N}x{K}", rnd(M, K, dtype=dt), rnd(K, N, dtype=dt), None, None))
        cases.append(("a.T, b.T", rnd(320, 500, dtype=dt).t(), rnd(256, 320, dtype=dt).t(), None, None))
        if dt != torch.float16:
            cases.append(("gelu 1000x777x333", rnd(1000, 333, dtype=dt), rnd(333, 777, dtype=dt), "gelu", None))
        for M, N, K in [(1000, 776, 328), (8, 1024, 72), (1536, 136, 2056)]:
            for act in (None, "gelu"):
                cases.append((f"tma {M}x{N}x{K}", rnd(M, K, dtype=dt), rnd(K, N, dtype=dt), act, "tma"))
    bf16 = torch.bfloat16
    for act in (None, "gelu"):  # big enough for triton_matmul to pick the TMA kernel
        cases.append(("2048x4096x520", rnd(2048, 520, dtype=bf16), rnd(520, 4096, dtype=bf16), act, None))
    cases.append(("gelu 512x512x512", rnd(512, 512, dtype=bf16), rnd(512, 512, dtype=bf16), "gelu", None))
    cases.append(
        ("sliced", rnd(600, 900, dtype=bf16)[::2, 100:612], rnd(1024, 300, dtype=bf16)[::2, :256], "gelu", None)
    )
    for name, a, b, act, kernel in cases:
        a_before, b_before = a.clone(), b.clone()
        if kernel == "tma":
            c = torch.full((a.shape[0], b.shape[1]), float("nan"), device=dev, dtype=a.dtype)
            launch_tma_small(mm, a, b, c, act == "gelu")
        else:
            c = mm.triton_matmul(a, b, act)
        ref = a.double() @ b.double()
        if act:
            ref = F.gelu(ref, approximate="tanh")
        err, rel, _ = stats.add(f"{str(a.dtype).replace('torch.', '')} act={act}", a.dtype, c, ref)
        ok = (
            rel <= tol[a.dtype]
            and c.dtype == a.dtype
            and c.shape == ref.shape
            and not torch.isnan(c).any().item()
            and torch.equal(a, a_before)
            and torch.equal(b, b_before)
        )
        ok_all &= ok
        if not ok:
            log(f"  MATMUL FAIL {name} {a.dtype} act={act}: max abs {err:.3e}, rel {rel:.3e}")
    stats.report("matmul")
    bad = [
        lambda: mm.triton_matmul(rnd(4, 5, dtype=torch.float16), rnd(6, 4, dtype=torch.float16)),
        lambda: mm.triton_matmul(rnd(4, 5, dtype=torch.float16), rnd(5, 4, dtype=torch.float32)),
        lambda: mm.triton_matmul(rnd(4, 5, dtype=torch.float16), rnd(5, 4, dtype=torch.float16), "relu"),
    ]
    for f in bad:
        try:
            f()
            ok_all = False
            log("  MATMUL FAIL: invalid input did not raise ValueError")
        except ValueError:
            pass
    return ok_all


# ------------------------------------------------------------------------------------------------
# timings

ROWS = []


def row(op, shape, dtype, unit, ours, torch_v, target, goal, note=""):
    """One result; goal is the number to reach (None: for information only)."""
    met = goal is None or ours >= goal
    pct = "-" if goal is None else f"{100 * ours / goal:.0f}%"
    ROWS.append(
        dict(
            op=op,
            shape=shape,
            dtype=str(dtype).replace("torch.", ""),
            unit=unit,
            ours=ours,
            torch=torch_v,
            target=target,
            pct=pct,
            met=met,
            note=note,
        )
    )
    ratio = "-" if not torch_v else f"{ours / torch_v:.2f}"
    log(
        f"  {op:12s} {shape:30s} {ROWS[-1]['dtype']:8s} ours {fmt(ours)} {unit}, "
        f"torch {fmt(torch_v)}, ratio {ratio}, target {target}: {pct} "
        f"{'met' if met else 'MISSED'} {note}"
    )


SOFTMAX_SHAPES = [
    ((16384, 1024), torch.float32),
    ((16384, 1024), torch.bfloat16),
    ((4096, 16384), torch.float32),
    ((16384, 16384), torch.float32),
    ((1024, 262144), torch.float32),
    ((1024, 262144), torch.bfloat16),
    ((65536, 128), torch.float32),
]


def compiled(fn, enabled):
    """`fn` through torch.compile, or None (`--no-compile`, or where it fails to build)."""
    return torch.compile(fn) if enabled else None


def maybe(measure):
    """A compiled anchor's figure, or None where it could not run (said in the log)."""
    try:
        return measure()
    except Exception as e:  # noqa: BLE001 - an anchor that does not build is reported, not fatal
        log(f"  (anchor failed: {type(e).__name__}: {str(e)[:160]})")
        return None


def time_softmax(sm, dev, compile_anchors=True):
    softmax_compiled = compiled(lambda t: torch.softmax(t, dim=-1), compile_anchors)
    for (M, N), dt in SOFTMAX_SHAPES:
        x = torch.randn(M, N, device=dev, dtype=dt)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        ours = gbs(nbytes, bench(lambda: sm.triton_softmax(x)))
        ref = gbs(nbytes, bench(lambda: torch.softmax(x, dim=-1)))
        copy = gbs(nbytes, bench(lambda: y.copy_(x)))
        comp = maybe(lambda: gbs(nbytes, bench(lambda: softmax_compiled(x)))) if softmax_compiled else None
        note = f"copy {copy:,.0f} GB/s, ours {100 * ours / copy:.0f}% of copy; torch.compile {fmt(comp)} GB/s"
        if N > sm._MAX_FUSED_N:  # the long-row paths side by side: one pass (default where it fits), split
            split = gbs(nbytes, bench(lambda: sm._split_launch(x, y)))
            note += f"; split path {split:,.0f} GB/s" + ("" if sm._one_pass_plan(x) else " (the default here)")
        row("softmax", f"{M}x{N}", dt, "GB/s", ours, ref, ">= torch and >= 85% of copy", max(ref, 0.85 * copy), note)
        del x, y


MATMUL_SHAPES = [  # (label, M, N, K)
    ("square", 2048, 2048, 2048),
    ("square", 4096, 4096, 4096),
    ("square", 8192, 8192, 8192),
    ("70B MLP up", 8192, 28672, 8192),
    ("70B MLP down", 8192, 8192, 28672),
    ("8B MLP up", 8192, 14336, 4096),
    ("ragged", 3000, 5000, 2000),
]
GELU_SHAPES = [
    ("square", 4096, 4096, 4096),
    ("square", 8192, 8192, 8192),
    ("70B MLP up", 8192, 28672, 8192),
    ("ragged", 3000, 5000, 2000),
]


def time_matmul(mm, dev, compile_anchors=True):
    mm_gelu_compiled = compiled(lambda a, b: F.gelu(a @ b, approximate="tanh"), compile_anchors)
    for label, M, N, K in MATMUL_SHAPES:
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
        fl = 2 * M * N * K
        ours = tflops(fl, bench(lambda: mm.triton_matmul(a, b)))
        ref = tflops(fl, bench(lambda: a @ b))
        row(
            "matmul",
            f"{M}x{N}x{K} {label}",
            torch.bfloat16,
            "TFLOP/s",
            ours,
            ref,
            ">= 95% cuBLAS",
            0.95 * ref,
            config_used(mm, a, b),
        )
        del a, b
    for label, M, N, K in GELU_SHAPES:
        a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
        fl = 2 * M * N * K
        ours = tflops(fl, bench(lambda: mm.triton_matmul(a, b, "gelu")))
        ref = tflops(fl, bench(lambda: F.gelu(a @ b, approximate="tanh")))
        comp = maybe(lambda: tflops(fl, bench(lambda: mm_gelu_compiled(a, b)))) if mm_gelu_compiled else None
        row(
            "matmul+gelu",
            f"{M}x{N}x{K} {label}",
            torch.bfloat16,
            "TFLOP/s",
            ours,
            ref,
            ">= torch mm then gelu",
            ref,
            f"{config_used(mm, a, b)}; torch.compile {fmt(comp)} TFLOP/s",
        )
        del a, b


def time_matmul_other_dtypes(mm, dev):
    n = 4096
    for dt, note in ((torch.float16, ""), (torch.float32, "ours: 3xTF32, pointer kernel; torch: fp32 SGEMM, no TF32")):
        a = torch.randn(n, n, device=dev, dtype=dt)
        b = torch.randn(n, n, device=dev, dtype=dt)
        ours = tflops(2 * n**3, bench(lambda: mm.triton_matmul(a, b)))
        ref = tflops(2 * n**3, bench(lambda: a @ b))
        row("matmul", f"{n}x{n}x{n} square", dt, "TFLOP/s", ours, ref, "(info)", None, note)


def config_used(mm, a, b):
    """Which kernel and autotuned configuration triton_matmul(a, b) ran last."""
    c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
    tma = mm._use_tma(a, b, c)
    cfg = getattr(mm._matmul_tma_kernel_tuned if tma else mm._matmul_kernel_tuned, "best_config", None)
    name = "tma" if tma else "pointer"
    if cfg is None:
        return name
    kw = cfg.kwargs
    s = f"{name} {kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']} s{cfg.num_stages} w{cfg.num_warps}"
    return s + (" split" if kw.get("SPLIT_EPILOGUE") else "")


def time_gelu(gl, dev):
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(16384, 16384, device=dev, dtype=dt)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        ours = gbs(nbytes, bench(lambda: gl.triton_gelu(x)))
        ref = gbs(nbytes, bench(lambda: F.gelu(x, approximate="tanh")))
        copy = gbs(nbytes, bench(lambda: y.copy_(x)))
        row(
            "gelu",
            "16384x16384",
            dt,
            "GB/s",
            ours,
            ref,
            ">= 95% of copy",
            0.95 * copy,
            f"copy {copy:,.0f} GB/s, ours {100 * ours / copy:.0f}% of copy",
        )
        del x, y


# ------------------------------------------------------------------------------------------------
# sweeps (--sweep): the measurements behind the heuristics in the kernels


def sweep_softmax(sm, dev, budget_s):
    t_end = time.time() + budget_s
    log("softmax sweep: one-pass kernel, (rows per program, num_warps) -> GB/s")
    for (M, N), dt in [
        ((16384, 1024), torch.float32),
        ((16384, 1024), torch.bfloat16),
        ((65536, 128), torch.float32),
        ((4096, 16384), torch.float32),
        ((4096, 32768), torch.float32),
    ]:
        x = torch.randn(M, N, device=dev, dtype=dt)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        bn = triton.next_power_of_2(N)
        res = []
        combos = sorted({(max(1, e // bn), w) for e in (2048, 4096, 8192, 16384, 32768) for w in (4, 8, 16, 32)})
        for bm, w in combos:
            per_thread = bm * bn // (32 * w)
            if per_thread < 4 or per_thread > 64 or time.time() > t_end:
                continue
            try:
                ms = bench(lambda: sm._fused_launch(x, y, block_m=bm, num_warps=w), rep=50)
                res.append((gbs(nbytes, ms), bm, w))
            except Exception as e:  # noqa: BLE001
                log(f"    fail bm={bm} w={w}: {repr(e)[:120]}")
        res.sort(reverse=True)
        log(f"  {M}x{N} {dt}: " + ", ".join(f"bm{bm}/w{w}: {v:,.0f}" for v, bm, w in res[:8]))
        default = gbs(nbytes, bench(lambda: sm.triton_softmax(x), rep=50))
        log(f"    default heuristic: {default:,.0f} GB/s")
        del x, y
    log("softmax sweep: split path, (BLOCK_N, target programs, num_warps) -> GB/s")
    for (M, N), dt in [
        ((1024, 262144), torch.float32),
        ((1024, 262144), torch.bfloat16),
        ((4096, 16384), torch.float32),
        ((4096, 32768), torch.float32),
        ((8, 1 << 20), torch.float32),
    ]:
        x = torch.randn(M, N, device=dev, dtype=dt)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        res = []
        for bn in (2048, 4096, 8192, 16384):
            for tp in (2048, 8192, 32768):
                for w in (4, 8):
                    if time.time() > t_end:
                        continue
                    try:
                        ms = bench(lambda: sm._split_launch(x, y, block_n=bn, target_programs=tp, num_warps=w), rep=50)
                        res.append((gbs(nbytes, ms), bn, tp, w))
                    except Exception as e:  # noqa: BLE001
                        log(f"    fail {bn} {tp} {w}: {repr(e)[:120]}")
        res.sort(reverse=True)
        log(f"  {M}x{N} {dt}: " + ", ".join(f"{bn}/{tp}/w{w}: {v:,.0f}" for v, bn, tp, w in res[:8]))
        if res:
            log(f"    worst: {res[-1][0]:,.0f}")
        default = gbs(nbytes, bench(lambda: sm.triton_softmax(x), rep=50))
        log(f"    default heuristic: {default:,.0f} GB/s")
        if N < 262144:
            continue
        pm = torch.empty(M, 64, device=dev)
        ms_a = bench(
            lambda: sm._softmax_partials_kernel[(M * 64,)](
                x, pm, pm, N, x.stride(0), x.stride(1), 64, triton.cdiv(N, 64 * 8192), BLOCK_N=8192, num_warps=4
            ),
            rep=50,
        )
        log(f"    pass 1 alone (stats, reads once): {gbs(nbytes / 2, ms_a):,.0f} GB/s read")
        del x, y


def sweep_softmax_one_pass(sm, dev, budget_s):
    """The one-pass long-row path: (chunk, num_warps[, reread, register cap]) -> GB/s, each result checked."""
    t_end = time.time() + budget_s
    log("softmax sweep: one-pass long rows, (chunk, num_warps) -> GB/s")
    for (M, N), dt in [
        ((1024, 262144), torch.float32),
        ((1024, 262144), torch.bfloat16),
        ((4096, 65536), torch.float32),
        ((8, 1 << 20), torch.float32),
        ((1, 1 << 20), torch.float32),
    ]:
        x = torch.randn(M, N, device=dev, dtype=dt)
        y = torch.empty_like(x)
        nbytes = 2 * x.numel() * x.element_size()
        res = []
        expected = torch.softmax(x.float(), dim=-1).to(dt)
        # (chunk, warps, register cap, reread): the chunk kept in registers through the wait, or
        # read again from L2 after it with the registers free for more programs per SM
        kept = [(c, w, 128, False) for c, w in itertools.product((8192, 16384), (4, 8, 16)) if c // (32 * w) <= 64]
        reread = [(4096, 8, 64, True), (8192, 8, 64, True), (4096, 4, 64, True), (8192, 4, 128, True)]
        for chunk, w, cap, again in kept + reread:
            parts = sm._one_pass_parts(x, chunk, w, cap)
            if not parts or time.time() > t_end:
                continue
            try:
                launch = partial(sm._one_pass_launch, x, y, parts, chunk, num_warps=w, reread=again, max_registers=cap)
                ms = bench(launch, rep=50)
                wrong = "" if torch.allclose(y.float(), expected.float(), atol=1e-3, rtol=1e-2) else " WRONG"
                res.append((gbs(nbytes, ms), f"{chunk}/w{w}{f'/reread/r{cap}' if again else ''}{wrong}"))
            except Exception as e:  # noqa: BLE001
                log(f"    fail chunk={chunk} w={w} reread={again}: {repr(e)[:120]}")
        res.sort(reverse=True)
        log(f"  {M}x{N} {dt}: " + ", ".join(f"{how}: {v:,.0f}" for v, how in res[:12]))
        split = gbs(nbytes, bench(lambda: sm._split_launch(x, y), rep=50))
        default = gbs(nbytes, bench(lambda: sm.triton_softmax(x), rep=50))
        log(f"    split path {split:,.0f} GB/s; default heuristic {default:,.0f} GB/s")
        del x, y


def sweep_matmul(mm, dev, budget_s):
    """Both kernels (pointer, TMA persistent) on the same problems, each autotuned."""
    t_end = time.time() + budget_s
    log("matmul sweep: pointer kernel vs TMA kernel, TFLOP/s")
    bf16, fp16, fp32 = torch.bfloat16, torch.float16, torch.float32
    problems = [
        (2048, 2048, 2048, bf16, False),
        (3072, 3072, 3072, bf16, False),
        (4096, 4096, 4096, bf16, False),
        (4096, 4096, 4096, bf16, True),
        (8192, 8192, 8192, bf16, True),
        (4096, 4096, 4096, fp16, False),
        (4096, 4096, 4096, fp32, False),
        (4096, 4096, 4096, fp32, True),
    ]
    for M, N, K, dt, gelu in problems:
        if time.time() > t_end:
            log("  out of time")
            break
        a = torch.randn(M, K, device=dev, dtype=dt)
        b = torch.randn(K, N, device=dev, dtype=dt)
        c = torch.empty(M, N, device=dev, dtype=dt)
        fl = 2 * M * N * K
        res = {}
        for name, launch in (("pointer", mm._launch_pointer), ("tma", mm._launch_tma)):
            try:
                res[name] = tflops(fl, bench(lambda: launch(a, b, c, gelu)))
            except Exception as e:  # noqa: BLE001
                log(f"  {name} failed: {repr(e)[:200]}")
        if gelu:
            ref = tflops(fl, bench(lambda: F.gelu(a @ b, approximate="tanh")))
        else:
            ref = tflops(fl, bench(lambda: a @ b))
        used = "tma" if mm._use_tma(a, b, c) else "pointer"
        log(
            f"  {M}x{N}x{K} {dt} gelu={gelu}: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in res.items())
            + f", torch {ref:,.0f}; triton_matmul uses {used}"
        )
        del a, b, c


def sweep_gelu(gl, dev, budget_s):
    """GeLU's (BLOCK_SIZE, num_warps) on 16384x16384, fp32 and bf16, against a device copy."""
    t_end = time.time() + budget_s
    log("gelu sweep: (BLOCK_SIZE, num_warps) -> GB/s and % of copy")
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(16384, 16384, device=dev, dtype=dt)
        y = torch.empty_like(x)
        n, nbytes = x.numel(), 2 * x.numel() * x.element_size()
        copy = gbs(nbytes, bench(lambda: y.copy_(x)))
        res = []
        for block in (1024, 2048, 4096, 8192, 16384):
            for w in (4, 8, 16):
                if time.time() > t_end or block // (32 * w) < 4:
                    continue
                grid = (triton.cdiv(n, block),)
                ms = bench(lambda: gl.gelu_kernel[grid](x, y, n, BLOCK_SIZE=block, num_warps=w), rep=50)
                res.append((gbs(nbytes, ms), block, w))
        res.sort(reverse=True)
        log(
            f"  {dt} (copy {copy:,.0f} GB/s, default {gl.launch_config(x.element_size())}): "
            + ", ".join(f"{b}/w{w}: {v:,.0f} ({100 * v / copy:.0f}%)" for v, b, w in res[:8])
        )
        del x, y


def to_markdown(header):
    lines = [
        header,
        "",
        "| op | shape | dtype | ours | PyTorch | unit | ours / PyTorch | target | % of target | met | note |",
        "| --- | --- | --- | ---: | ---: | --- | ---: | --- | ---: | --- | --- |",
    ]
    for r in ROWS:
        ratio = "-" if not r["torch"] else f"{r['ours'] / r['torch']:.2f}"
        lines.append(
            f"| {r['op']} | {r['shape']} | {r['dtype']} | {fmt(r['ours'])} | "
            f"{fmt(r['torch'])} | {r['unit']} | {ratio} | {r['target']} | {r['pct']} | "
            f"{'yes' if r['met'] else '**no**'} | {r['note']} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--sweep",
        nargs="?",
        const="softmax,matmul",
        default="",
        help="also run the tuning sweeps (softmax, matmul, gelu: comma-separated)",
    )
    ap.add_argument("--sweep-budget", type=float, default=150.0, help="seconds for the sweeps")
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--no-final", action="store_true", help="skip the final table (sweeps only)")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile anchors (they compile for minutes)")
    ap.add_argument("--only", default="softmax,matmul,gelu", help="which kernels the checks and the table cover")
    args = ap.parse_args()
    only = set(args.only.split(","))
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    dev = "cuda"
    props = torch.cuda.get_device_properties(0)
    header = (
        f"# softmax and matmul: reference kernels vs PyTorch, torch.compile, cuBLAS and a device copy\n\n"
        f"{torch.cuda.get_device_name()} ({props.multi_processor_count} SMs), "
        f"torch {torch.__version__}, triton {triton.__version__}, "
        f"do_bench median with L2 flush. Command: "
        f"`python benchmarks/bench_softmax_matmul.py`"
    )
    log(header.replace("\n", " "))
    sm, mm, gl = load("softmax"), load("matmul"), load("gelu")
    ok = True
    if not args.skip_checks:
        spec_tol = spec_tolerances()
        ok_s = ok_m = True
        if "softmax" in only:
            log("correctness: softmax")
            ok_s = check_softmax(sm, dev, spec_tol)
        if "matmul" in only:
            log("correctness: matmul")
            ok_m = check_matmul(mm, dev, spec_tol)
        ok = ok_s and ok_m
        log(f"correctness: {'all passed' if ok else 'FAILURES (see above)'}")
    if args.sweep:
        parts = args.sweep.split(",")
        share = args.sweep_budget / len(parts)
        if "softmax" in parts:
            sweep_softmax(sm, dev, share / 2)
            sweep_softmax_one_pass(sm, dev, share / 2)
        if "matmul" in parts:
            sweep_matmul(mm, dev, share)
        if "gelu" in parts and gl is not None:
            sweep_gelu(gl, dev, share)
        ROWS.clear()
    if args.no_final:
        return
    if "softmax" in only:
        log("timing: softmax")
        time_softmax(sm, dev, not args.no_compile)
    if "matmul" in only:
        log("timing: matmul")
        time_matmul(mm, dev, not args.no_compile)
        time_matmul_other_dtypes(mm, dev)
    if "gelu" in only and gl is not None and hasattr(gl, "triton_gelu"):
        log("timing: gelu (reference/gelu.py)")
        time_gelu(gl, dev)
    md = to_markdown(header + ("" if ok else "\n\n**Correctness checks FAILED: see the log.**"))
    print("\n" + md, flush=True)
    out = os.environ.get("OUT")
    if out:
        Path(out, "softmax_matmul.md").write_text(md)
    log(f"done in {time.time() - T0:.0f} s")


if __name__ == "__main__":
    main()
