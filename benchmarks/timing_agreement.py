"""Agreement of the grader's timing method with triton.testing.do_bench, per benchmark shape.

Times the staff reference on every benchmark shape of the spec with both methods (median, L2
flushed, same inputs), taking turns (see method_comparison.py), and prints a markdown table of
the two medians and their ratio (grader / do_bench). Needs a GPU.

    python benchmarks/timing_agreement.py [--problems gelu,softmax]
"""

from __future__ import annotations

import argparse
import sys

import triton.testing
from method_comparison import Calls, compare


def do_bench(calls: Calls, _rounds: int) -> list[float]:
    return [triton.testing.do_bench(calls[0], warmup=10, rep=60, return_mode="median")]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default=None)
    args = parser.parse_args()
    problems = args.problems.split(",") if args.problems else None
    compare(problems, do_bench, "do_bench", min_s=0.05, ratio_other_over_grader=False, out_name="timing_agreement.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
