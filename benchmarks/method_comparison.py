"""The grader's timing loop against another way of timing, shape by shape, taking turns.

Shared by timing_agreement.py (do_bench) and handout_method.py (the handout's old loop). The two
methods alternate ROUNDS times per shape and their samples are pooled: a GPU near its power
limit drifts by several percent over a second, which one-after-the-other measurements would
book as disagreement. Prints a markdown table of both medians and their ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.engine import timing  # noqa: E402
from grader.engine.assignment.load import load_assignment  # noqa: E402
from grader.engine.judge.performance import load_reference  # noqa: E402
from grader.engine.problems import REGISTRY  # noqa: E402
from grader.engine.problems.base import generator  # noqa: E402

ROUNDS = 5
Calls = list[Callable[[], Any]]


def compare(
    problems: list[str] | None,
    other: Callable[[Calls, int], list[float]],
    other_name: str,
    *,
    min_s: float,
    ratio_other_over_grader: bool,
    out_name: str,
) -> str:
    """Time the staff reference on every benchmark shape both ways; `other(calls, rounds)` returns
    milliseconds (one or many), `rounds` being how many the grader's loop just timed."""
    ratio_name = f"{other_name} / grader" if ratio_other_over_grader else f"grader / {other_name}"
    header = f"| problem | shape | grader median (ms) | {other_name} median (ms) | {ratio_name} |"
    rows = [header, "| --- | --- | --- | --- | --- |"]
    for problem in load_assignment().problems:
        if problems and problem.name not in problems:
            continue
        kind = REGISTRY[problem.name]
        fn = load_reference(problem)
        for case in problem.benchmarks:
            calls = [kind.timed(fn, kind.make_inputs(case, generator(7 + i, "cuda"))) for i in range(2)]
            timing.warm_up(calls)
            ours_s: list[float] = []
            theirs_ms: list[float] = []
            for _ in range(ROUNDS):
                samples = timing.measure(calls, budget_s=0.3, warm=False, min_s=min_s).samples_s
                ours_s += samples
                theirs_ms += other(calls, len(samples))
            ours, theirs = timing.Measurement(ours_s).median_ms, statistics.median(theirs_ms)
            ratio = theirs / ours if ratio_other_over_grader else ours / theirs
            rows.append(f"| {problem.name} | {case.name} | {ours:.4f} | {theirs:.4f} | {ratio:.3f} |")
            print(rows[-1], flush=True)
            del calls
            torch.cuda.empty_cache()
    table = "\n".join(rows)
    print("\n" + table)
    out = os.environ.get("OUT")
    if out:
        Path(out, out_name).write_text(table + "\n")
    return table
