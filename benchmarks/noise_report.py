"""Compare the per-shape and per-problem speed ratios of two gradings of the same submission.

Grading reference/ against itself, the ratios measure the timing method's own noise: they should
sit within 0.97-1.03 of 1.0 in each run and within 2% between the runs.

    python benchmarks/noise_report.py run1/result.json run2/result.json [--within 0.02]

With `--within`, the exit status says whether every problem's geomean, in both runs, lies within
that much of 1.0 (0: yes, 1: no, or a problem not measured): a script can choose by it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.engine.records.model import Result  # noqa: E402


def main(a: str, b: str, within: float | None = None) -> int:
    first, second = (Result.model_validate_json(Path(p).read_text()) for p in (a, b))
    outside = []
    print("| problem | shape | ratio run 1 | ratio run 2 | run 2 / run 1 |")
    print("| --- | --- | --- | --- | --- |")
    for p1, p2 in zip(first.problems, second.problems):
        if not (p1.performance and p2.performance and p1.performance.shapes and p2.performance.shapes):
            print(f"| {p1.name} | (not measured: {p1.performance.status if p1.performance else '-'}) | | | |")
            outside.append(f"{p1.name} not measured")
            continue
        for s1, s2 in zip(p1.performance.shapes, p2.performance.shapes):
            r1, r2 = s1.ratio or float("nan"), s2.ratio or float("nan")
            print(f"| {p1.name} | {s1.name} | {r1:.3f} | {r2:.3f} | {r2 / r1:.3f} |")
        g1, g2 = p1.performance.ratio_geomean or float("nan"), p2.performance.ratio_geomean or float("nan")
        print(f"| {p1.name} | **geomean** | {g1:.3f} | {g2:.3f} | {g2 / g1:.3f} |")
        if within is not None and not all(abs(g - 1) <= within for g in (g1, g2)):
            outside.append(f"{p1.name} {g1:.3f}, {g2:.3f}")
    print(f"\nwall time: run 1 {first.duration_s:.1f} s, run 2 {second.duration_s:.1f} s")
    if within is not None:
        verdict = "every geomean" if not outside else "outside: " + "; ".join(outside)
        print(f"within {within:g} of 1.0 in both runs: {verdict}")
    return 1 if within is not None and outside else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--within", type=float, default=None, help="exit 1 unless every geomean is this close to 1")
    args = parser.parse_args()
    sys.exit(main(str(args.first), str(args.second), args.within))
