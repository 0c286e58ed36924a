"""The handout's first benchmark loop against the grader's, on the same shapes, in one process.

`pytest handout --benchmark-only` first timed its rounds inside pytest-benchmark's pedantic loop,
which reads the clock after every round: the CPU waits for each round before queueing the next,
so the GPU idles between rounds (the handout now replays rounds timed the grader's way). The
grader queues a chunk of rounds behind one GPU sleep and reads the clock once per chunk. This script times the staff reference both ways, taking turns (ROUNDS
alternations, pooled), and prints both medians and their ratio. Needs a GPU.

    python benchmarks/handout_method.py [--problems gelu,softmax]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader import timing  # noqa: E402
from grader.performance import load_reference  # noqa: E402
from grader.problems import REGISTRY  # noqa: E402
from grader.problems.base import generator  # noqa: E402
from grader.spec import load_assignment  # noqa: E402

ROUNDS = 5


def synchronised_rounds(calls: list[Callable[[], Any]], rounds: int, clock: timing.CudaClock, flush: timing.L2Flusher) -> list[float]:
    """pytest-benchmark's pedantic loop as the handout drives it: setup, stamp, call, stamp, subtract."""
    samples = []
    for i in range(rounds):
        flush()
        cover = timing.COVER
        if cover.gpu_per_round_s < 2 * cover.host_per_round_s:  # what the handout's cover did per round
            cover.hold(1)
        start = clock()
        calls[i % len(calls)]()
        samples.append(clock() - start)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="gelu,softmax")
    args = parser.parse_args()
    spec = load_assignment()
    clock, flush = timing.CudaClock(), timing.L2Flusher()
    rows = ["| problem | shape | grader loop (ms) | synchronised rounds (ms) | ratio |", "| --- | --- | --- | --- | --- |"]
    for problem in spec.problems:
        if problem.name not in args.problems.split(","):
            continue
        kind = REGISTRY[problem.name]
        fn = load_reference(problem)
        for case in problem.benchmarks:
            calls = [kind.timed(fn, kind.make_inputs(case, generator(7 + i, "cuda"))) for i in range(2)]
            timing.warm_up(calls)
            chunked: list[float] = []
            synced: list[float] = []
            for _ in range(ROUNDS):
                m = timing.measure(calls, budget_s=0.3, warm=False, min_s=0.06)
                chunked += m.samples_s
                synced += synchronised_rounds(calls, len(m.samples_s), clock, flush)
            a, b = timing.Measurement(chunked).median_ms, timing.Measurement(synced).median_ms
            rows.append(f"| {problem.name} | {case.name} | {a:.4f} | {b:.4f} | {b / a:.3f} |")
            print(rows[-1], flush=True)
            del calls
            torch.cuda.empty_cache()
    table = "\n".join(rows)
    print("\n" + table)
    out = os.environ.get("OUT")
    if out:
        Path(out, "handout_method.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
