"""One `ROW` line for a FlashAttention grading (`BLOCK=budget benchmarks/gpu_block.sh`): its verdict, each shape's
ratio and peak against budget, and, given an earlier grading of the same submission, whether the
verdicts agree and the ratios are within 2% of it."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def shapes(result: dict) -> tuple[str, dict[str, dict]]:
    (fa,) = [p for p in result["problems"] if p["name"] == "flash_attention"]
    verdicts = ",".join(t["status"][0] for t in fa["tests"])
    perf = fa["performance"] or {}
    head = f"{fa['score']:g}/{fa['max_score']:g} tests {verdicts} perf {perf.get('status')}"
    if perf.get("status") != "measured":
        head += f" ({(perf.get('reason') or '')[:160]})"
    if fa.get("ungradable"):
        head += f" UNGRADABLE {fa['ungradable'][:160]}"
    return head, {s["name"]: s for s in perf.get("shapes", [])}


def main(label: str, out: str, alone: str | None = None) -> None:
    path = Path(out) / "result.json"
    if not path.is_file():
        tail = (Path(f"{out}.log").read_text() if Path(f"{out}.log").is_file() else "")[-300:]
        print(f"ROW {label}: NOT OK no result.json; {tail!r}")
        return
    result = json.loads(path.read_text())
    head, by_shape = shapes(result)
    parts = [
        f"{name} ratio {s['ratio']:.3f} peak {s['peak_gib']} of {s['budget_gib']} GiB"
        if s.get("ratio") is not None
        else f"{name} untimed"
        for name, s in by_shape.items()
    ]
    ok = all((s.get("peak_gib") or 0) <= (s.get("budget_gib") or 1e9) for s in by_shape.values())
    same = ""
    if alone and (Path(alone) / "result.json").is_file():
        first_head, first = shapes(json.loads((Path(alone) / "result.json").read_text()))
        agree = first_head.split(" perf ")[0] == head.split(" perf ")[0]
        drift = [
            abs(s["ratio"] / first[n]["ratio"] - 1)
            for n, s in by_shape.items()
            if s.get("ratio") and first.get(n, {}).get("ratio")
        ]
        worst = max(drift, default=0.0)
        ok = ok and agree and worst <= 0.02
        same = f"; verdicts {'as' if agree else 'NOT as'} alone, ratios within {worst:.1%} of alone"
    print(f"ROW {label}: {'ok' if ok else 'NOT OK'} {result['status']} {head}; {'; '.join(parts)}{same}")


if __name__ == "__main__":
    main(*sys.argv[1:])
