"""Which configuration Triton's autotuner picked, per kernel and key, in one or two Triton caches.

Made for a question the H200 left open (docs/gpu-runs/2026-12-02-session-11-class.md): the
reference graded against itself read 0.94 on the square matmul on one machine and 1.00 on another. The
orchestrator's reference was tuned where the reference-cache archive was built; the worker's
copy was tuned on the machine that graded. If the two picks differ, and the runner-up is within a
few percent, the ratio's bias is the autotuner's, not the timing method's.

With TRITON_CACHE_AUTOTUNING on (the reference cache sets it), Triton writes one
`<kernel>.autotune.json` per tuning key: every configuration's measured times. This prints each
pick, its margin over the runner-up, and, given two folders, where their picks differ.

    python benchmarks/autotune_picks.py ~/.cache/grader/reference-kernels/<version>/<machine> \
        [~/.cache/grader/kernels/<slot of the reference graded as a student>]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NamedTuple


class Pick(NamedTuple):
    kernel: str
    key: str
    config: str
    time_ms: float
    runner_up_pct: float | None  # how much slower the second best was, in percent


def _describe(config: dict[str, Any]) -> str:
    kwargs = config.get("kwargs") or {}
    extra = {k: config[k] for k in ("num_warps", "num_stages", "num_ctas") if k in config}
    return ", ".join(f"{k}={v}" for k, v in {**kwargs, **extra}.items())


def _median(timing: Any) -> float | None:
    """Triton stores a time or a list of quantiles per configuration; the first is the median."""
    value = timing[0] if isinstance(timing, list) and timing else timing
    return float(value) if isinstance(value, (int, float)) else None


def picks(folder: Path) -> dict[tuple[str, str], Pick]:
    """(kernel, key) -> the fastest configuration found under `folder`; unreadable files skipped."""
    found: dict[tuple[str, str], Pick] = {}
    for path in sorted(folder.rglob("*.autotune.json")):
        try:
            data = json.loads(path.read_text())
            timed = [(c, _median(t)) for c, t in data["configs_timings"]]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        timed = sorted(((c, t) for c, t in timed if t is not None), key=lambda item: item[1])
        if not timed:
            continue
        best, best_t = timed[0]
        margin = (timed[1][1] / best_t - 1) * 100 if len(timed) > 1 and best_t > 0 else None
        kernel = path.name.removesuffix(".autotune.json")
        key = str(data.get("key"))
        found[(kernel, key)] = Pick(kernel, key, _describe(best), best_t, margin)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+", help="one Triton cache, or two to compare")
    args = parser.parse_args()
    if len(args.folders) > 2:
        parser.error("one folder, or two to compare")
    tables = [picks(folder) for folder in args.folders]
    first = tables[0]
    other = tables[1] if len(tables) > 1 else {}
    differ = 0
    print("| kernel | key | pick | ms | runner-up | other folder's pick | same |")
    print("| --- | --- | --- | ---: | ---: | --- | --- |")
    for name in sorted(first.keys() | other.keys()):
        a, b = first.get(name), other.get(name)
        shown = a or b
        assert shown is not None
        margin = f"+{shown.runner_up_pct:.1f}%" if shown.runner_up_pct is not None else ""
        same = "" if not other else ("yes" if a and b and a.config == b.config else "**no**")
        differ += same == "**no**"
        print(
            f"| {shown.kernel} | {shown.key[:60]} | {a.config if a else '(none)'} | "
            f"{shown.time_ms:.4f} | {margin} | {b.config if b else ''} | {same} |"
        )
    if other:
        print(f"\n{differ} of {len(first.keys() | other.keys())} tuned kernels picked differently")
    return 0


if __name__ == "__main__":
    sys.exit(main())
