"""What a kernel's first call on a new shape costs once its compiled code is on disk, with and
without the PyTorch profiler that the grader's worker runs around every correctness call.

A warm regrade (per-submission kernel cache) still spends seconds per new shape on the first
call of the reference FlashAttention graded as a submission; this separates loading compiled
kernels from the profiler's own cost. Run it three times in fresh processes, the first to compile:

    python benchmarks/first_call_cost.py --profiler off   # compiles (cold disk cache)
    python benchmarks/first_call_cost.py --profiler on    # first calls, profiled, warm disk cache
    python benchmarks/first_call_cost.py --profiler off   # first calls, not profiled
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.engine.assignment.load import load_assignment  # noqa: E402
from grader.engine.judge.performance import load_reference  # noqa: E402
from grader.engine.problems import REGISTRY  # noqa: E402
from grader.engine.problems.base import generator  # noqa: E402

CASES = ("single-token-fp16", "ragged-17-causal-bf16", "d16-bf16")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profiler", choices=["on", "off"], required=True)
    parser.add_argument("--problem", default="flash_attention")
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    problem = next(p for p in load_assignment().problems if p.name == args.problem)
    kind, fn = REGISTRY[problem.name], load_reference(problem)
    cases = {c.name: c for c in problem.suite_cases("gpu")}
    torch.zeros(1, device="cuda")
    for name in args.cases.split(","):
        case = cases[name]
        times = []
        for repeat in range(2):
            inputs = {
                k: v.cuda() if isinstance(v, torch.Tensor) else v
                for k, v in kind.make_inputs(case, generator(repeat)).items()
            }
            torch.cuda.synchronize()
            start = time.perf_counter()
            if args.profiler == "on":
                acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
                with torch.profiler.profile(activities=acts):
                    kind.call(fn, inputs, case)
                    torch.cuda.synchronize()
            else:
                kind.call(fn, inputs, case)
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        print(f"| {args.profiler} | {name} | {times[0]:.3f} | {times[1]:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
