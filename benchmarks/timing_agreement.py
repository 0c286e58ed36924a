"""Agreement of the grader's timing method with triton.testing.do_bench, per benchmark shape.

Times the staff reference on every benchmark shape of the spec with both methods (median, L2
flushed, same inputs) and prints a markdown table of the two medians and their ratio. Needs a GPU.
The two methods take turns (ROUNDS alternations, pooled), as the grader's two sides do: a GPU
near its power limit drifts by several percent over a second, which one-after-the-other
measurements would book as disagreement.

    python benchmarks/timing_agreement.py [--problems gelu,softmax]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import timing  # noqa: E402
from grader.performance import load_reference  # noqa: E402
from grader.problems import REGISTRY  # noqa: E402
from grader.problems.base import generator  # noqa: E402
from grader.spec import load_assignment  # noqa: E402


ROUNDS = 5


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default=None)
    args = parser.parse_args()
    spec = load_assignment()
    rows = ["| problem | shape | grader median (ms) | do_bench median (ms) | ratio |", "| --- | --- | --- | --- | --- |"]
    for problem in spec.problems:
        if args.problems and problem.name not in args.problems.split(","):
            continue
        kind = REGISTRY[problem.name]
        fn = load_reference(problem)
        for case in problem.benchmarks:
            calls = [kind.timed(fn, kind.make_inputs(case, generator(7 + i, "cuda"))) for i in range(2)]
            timing.warm_up(calls)
            ours_s: list[float] = []
            theirs_ms: list[float] = []
            for _ in range(ROUNDS):
                ours_s += timing.measure(calls, budget_s=0.3, warm=False, min_s=0.05).samples_s
                theirs_ms.append(triton.testing.do_bench(calls[0], warmup=10, rep=60, return_mode="median"))
            ours = timing.Measurement(ours_s).median_ms
            theirs = statistics.median(theirs_ms)
            rows.append(f"| {problem.name} | {case.name} | {ours:.4f} | {theirs:.4f} | {ours / theirs:.3f} |")
            print(rows[-1], flush=True)
            del calls
            torch.cuda.empty_cache()
    table = "\n".join(rows)
    print("\n" + table)
    out = os.environ.get("OUT")
    if out:
        Path(out, "timing_agreement.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
