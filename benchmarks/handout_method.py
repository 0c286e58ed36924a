"""The handout's first benchmark loop against the grader's, on the same shapes, in one process.

`pytest handout --benchmark-only` first timed its rounds inside pytest-benchmark's pedantic loop,
which reads the clock after every round: the CPU waits for each round before queueing the next,
so the GPU idles between rounds (the handout now replays rounds timed the grader's way). The
grader queues a chunk of rounds behind one GPU sleep and reads the clock once per chunk. This
script times the staff reference both ways, taking turns (see method_comparison.py), and prints
both medians and their ratio (synchronised / grader). Needs a GPU.

    python benchmarks/handout_method.py [--problems gelu,softmax]
"""

from __future__ import annotations

import argparse
import sys

from method_comparison import Calls, compare

from grader.engine import timing  # noqa: E402  (after method_comparison, which puts the repository on sys.path)


def synchronised_rounds(calls: Calls, rounds: int) -> list[float]:
    """pytest-benchmark's pedantic loop as the handout drove it: setup, stamp, call, stamp, subtract."""
    clock, flush, cover = timing.CudaClock(), timing.L2Flusher(), timing.COVER
    samples_ms = []
    for i in range(rounds):
        flush()
        if cover.gpu_per_round_s < 2 * cover.host_per_round_s:  # what the handout's cover did per round
            cover.hold(1)
        start = clock()
        calls[i % len(calls)]()
        samples_ms.append((clock() - start) * 1e3)
    return samples_ms


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", default="gelu,softmax")
    args = parser.parse_args()
    compare(
        args.problems.split(","),
        synchronised_rounds,
        "synchronised rounds",
        min_s=0.06,
        ratio_other_over_grader=True,
        out_name="handout_method.md",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
