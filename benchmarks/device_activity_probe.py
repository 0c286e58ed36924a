"""What a watched forward runs on the GPU, and where each kernel was launched from (issue 50's
device-activity check, before it is built): for every device event of one watched call of the
correct example's four forwards, its name, and the CPU event that launched it (matched by the
profiler's correlation id) with the innermost range around that: a Triton launch of the
submission (`grader.engine.harness.watch.LAUNCH`), an aten op, or neither.

GPU only: `python benchmarks/device_activity_probe.py` (prints one line per device kernel).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

from grader.engine.harness import watch
from grader.engine.harness.recording import Recording

ROOT = Path(__file__).resolve().parents[1]


def load(name: str):  # noqa: ANN201 - a submission module
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples/submissions/correct" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def forwards() -> dict[str, object]:
    x = torch.randn(1024, 1000, device="cuda", dtype=torch.float16)
    a = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(1, 4, 256, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return {
        "gelu": lambda: load("gelu").triton_gelu(x),
        "softmax": lambda: load("softmax").triton_softmax(x),
        "matmul": lambda: load("matmul").triton_matmul(a, b, "gelu"),
        "flash_attention": lambda: load("flash_attention").flash_attention(q, k, v, True),
    }


def main() -> int:
    if not torch.cuda.is_available():
        print("device_activity_probe: needs a CUDA GPU", file=sys.stderr)
        return 2
    watch.arm()
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    for name, call in forwards().items():
        call()  # compiled and autotuned outside the profile
        torch.cuda.synchronize()
        Recording.watching[0] = True
        try:
            with torch.profiler.profile(activities=acts) as prof:
                call()
                torch.cuda.synchronize()
        finally:
            Recording.watching[0] = False
        events = list(prof.profiler.kineto_results.events())
        cpu = [e for e in events if e.device_type() != torch.autograd.DeviceType.CUDA]
        by_corr: dict[int, list] = {}
        for e in cpu:
            by_corr.setdefault(e.correlation_id(), []).append(e)
        for e in events:
            if e.device_type() != torch.autograd.DeviceType.CUDA:
                continue
            callers = [c for c in by_corr.get(e.correlation_id(), []) if c.correlation_id()]
            where = "no launching CPU event"
            if callers:
                c = callers[0]
                around = [
                    r
                    for r in cpu
                    if r.start_thread_id() == c.start_thread_id()
                    and r.start_ns() <= c.start_ns() <= r.end_ns()
                    and r is not c
                    and r.correlation_id() != c.correlation_id()
                ]
                inner = min(around, key=lambda r: r.end_ns() - r.start_ns(), default=None)
                launch = any(r.name() == watch.LAUNCH for r in around)
                where = f"by {c.name()} in {inner.name() if inner else 'nothing'}; inside a Triton launch: {launch}"
            print(f"PROBE {name}: {e.name()[:90]!r} corr {e.correlation_id()}: {where}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
