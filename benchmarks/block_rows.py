"""One line per GPU-block row (issue 42): what a grading's result.json says against what it must say.

A call of the GPU block can be cut short at its limit, so each row is judged and printed the moment
its grading lands, as `ROW <name>: ok|NOT OK <facts>`, and the lines are grep-able from the log.

    python benchmarks/block_rows.py seen NAME RESULT.json       # graded: its score, wall and phases
    python benchmarks/block_rows.py full NAME RESULT.json       # every point, every shape timed, no flag
    python benchmarks/block_rows.py same NAME A.json B.json     # the same verdicts (scores may move with speed)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load(path: str) -> dict[str, Any] | None:
    file = Path(path)
    return json.loads(file.read_text()) if file.is_file() else None


def phases(result: dict[str, Any]) -> str:
    """Where each problem's time went, summed over the problems (the record's phases)."""
    total: dict[str, float] = {}
    for problem in result["problems"]:
        for key, value in (problem.get("phases") or {}).items():
            total[key] = total.get(key, 0.0) + float(value or 0.0)
    return ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in total.items() if v)


def full_marks(result: dict[str, Any]) -> list[str]:
    """What keeps a grading from full marks with every shape measured and unflagged."""
    wrong = []
    if result["score"] < result["max_score"] - 1e-6:
        wrong.append(f"score {result['score']:.2f} of {result['max_score']:.0f}")
    for problem in result["problems"]:
        perf = problem.get("performance") or {}
        if perf.get("status") != "measured":
            wrong.append(f"{problem['name']} performance {perf.get('status')}: {perf.get('reason', '')[:120]}")
            continue
        for shape in perf.get("shapes", []):
            if shape.get("ratio") is None or shape.get("flags"):
                wrong.append(
                    f"{problem['name']} {shape['name']}: ratio {shape.get('ratio')} flags {shape.get('flags')}"
                )
    return wrong


def verdicts(result: dict[str, Any]) -> dict[str, tuple[str, str | None, float]]:
    """Per problem: its status, its performance status and its correctness points."""
    out = {}
    for problem in result["problems"]:
        perf = problem.get("performance") or {}
        points = sum(t["score"] for t in problem.get("tests", []))
        out[problem["name"]] = (problem["status"], perf.get("status"), round(points, 3))
    return out


def main(argv: list[str]) -> int:
    mode, name, *paths = argv
    results = [load(p) for p in paths]
    if any(r is None for r in results):
        print(f"ROW {name}: NOT OK no result at {', '.join(p for p, r in zip(paths, results) if r is None)}")
        return 1
    first = results[0]
    assert first is not None
    facts = f"{first['score']:.2f}/{first['max_score']:.0f}, {first['duration_s']:.1f} s graded; {phases(first)}"
    if mode == "seen":
        print(f"ROW {name}: ok {facts}")
        return 0
    if mode == "full":
        wrong = full_marks(first)
        shapes = sum(len((p.get("performance") or {}).get("shapes", [])) for p in first["problems"])
        print(
            f"ROW {name}: {'ok' if not wrong else 'NOT OK'} {facts}; {shapes} shapes timed"
            + "".join(f"\n    {w}" for w in wrong)
        )
        return 0 if not wrong else 1
    if mode == "same":
        a, b = (verdicts(r) for r in results[:2])  # type: ignore[arg-type]
        differ = [f"{k}: {a.get(k)} against {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        second = results[1]
        assert second is not None
        print(
            f"ROW {name}: {'ok' if not differ else 'NOT OK'} {facts}; against {second['score']:.2f}, "
            f"{second['duration_s']:.1f} s" + "".join(f"\n    {d}" for d in differ)
        )
        return 0 if not differ else 1
    raise SystemExit(f"block_rows: unknown mode {mode!r} (seen, full or same)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
