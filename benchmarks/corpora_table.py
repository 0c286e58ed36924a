"""Both corpora on the GPU, one grading at a time, in one table of expected against got.

The honest corpus (tests/honest) must get full correctness and a measured, unflagged performance
on every problem it lists; the adversarial corpus's GPU entries and every honest twin
(tests/adversarial) must get their verdicts. Gradings run one after another so that no two share
the GPU while timed. Prints a markdown table and writes it with the raw results under --out.

    python benchmarks/corpora_table.py --out /tmp/corpora [--only NAME,NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.adversarial import test_corpus as adversarial  # noqa: E402  (its builder and twins)

HONEST = ROOT / "tests" / "honest"


def grade(
    submission: Path, out: Path, problems: list[str], extra: list[str]
) -> tuple[dict[str, Any] | None, float, str]:
    start = time.monotonic()
    cmd = [
        sys.executable,
        "-m",
        "grader.cli",
        "grade",
        str(submission),
        "--out",
        str(out),
        "--problems",
        ",".join(problems),
        "--device",
        "cuda",
        *extra,
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, errors="replace", env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    result = out / "result.json"
    return (json.loads(result.read_text()) if result.is_file() else None), time.monotonic() - start, done.stderr[-500:]


def describe(problem: dict[str, Any]) -> str:
    perf = problem.get("performance") or {}
    correct = sum(t["score"] for t in problem["tests"])
    ratio = perf.get("ratio_geomean")
    text = f"{problem['status']}, correctness {correct:.2f}, performance {perf.get('status')}"
    if ratio:
        text += f" (ratio {ratio:.3f})"
    if perf.get("status") == "flagged":
        text += f": {perf.get('reason', '')[:90]}"
    return text


def show(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row as soon as it is known: a run cut short by its time limit still tells what it saw."""
    print(
        f"| {row[0]} | {row[1]} | {row[2]} | {row[4] if len(row) > 4 else ''} | {'yes' if row[3] else '**NO**'} "
        f"| {row[5] if len(row) > 5 else 0:.0f} |",
        flush=True,
    )
    return row


def honest_rows(base: Path, only: set[str], untimed: set[str]) -> list[tuple[Any, ...]]:
    spec = __import__("grader.spec.load", fromlist=["load_assignment"]).load_assignment(hidden=False)
    rows = []
    for entry in tomllib.loads((HONEST / "corpus.toml").read_text())["submission"]:
        if only and entry["name"] not in only:
            continue
        sub = base / "honest" / entry["name"] / "submission"
        shutil.copytree(HONEST / "submissions" / entry["name"], sub)
        timed = entry["name"] not in untimed
        result, seconds, err = grade(sub, sub.parent / "out", entry["problems"], [] if timed else ["--no-timing"])
        for name in entry["problems"]:
            want = spec.problem(name).points.correctness
            problem = next((p for p in (result or {}).get("problems", []) if p["name"] == name), None)
            if problem is None:
                rows.append(
                    show(
                        (
                            f"honest `{entry['name']}`",
                            name,
                            "a result",
                            False,
                            "no result: " + err.replace("\n", " ")[-200:],
                            seconds,
                        )
                    )
                )
                continue
            correct = sum(t["score"] for t in problem["tests"])
            perf = problem["performance"] or {}
            measured = perf.get("status") == "measured" and not any(s["flags"] for s in perf.get("shapes", []))
            ok = abs(correct - want) < 1e-3 and (measured or not timed)
            expected = f"full correctness ({want:g})" + (", measured, no flag" if timed else " (run with --no-timing)")
            rows.append(show((f"honest `{entry['name']}`", name, expected, ok, describe(problem), seconds)))
    return rows


def adversarial_rows(base: Path, only: set[str]) -> list[tuple[Any, ...]]:
    rows = []
    for entry in adversarial.CORPUS:
        if not (entry.get("gpu") or entry.get("honest")) or (only and entry["name"] not in only):
            continue
        if entry.get("root") and os.geteuid() != 0:
            continue
        submission, places, args = adversarial._build(entry, base / "adversarial")
        out = Path(places["OUT"])
        extra = args[args.index("--device") + 2 :]
        result, seconds, err = grade(submission, out, [entry["problem"], *entry.get("others", {})], extra)
        problem = next((p for p in (result or {}).get("problems", []) if p["name"] == entry["problem"]), None)
        expected = [
            f"status {entry['verdict']}" if "verdict" in entry else "",
            f"score {entry['score']}" if "score" in entry else "",
        ]
        if "performance" in entry:
            expected.append(f"performance {'/'.join(entry['performance'])}")
        if "measured_below" in entry or entry.get("honest"):
            expected.append(
                "performance measured, no flag"
                + (f", ratio < {entry['measured_below']}" if "measured_below" in entry else "")
            )
        if problem is None:
            rows.append(
                show(
                    (
                        f"`{entry['name']}`",
                        entry["problem"],
                        "; ".join(e for e in expected if e),
                        False,
                        "no result: " + err.replace("\n", " ")[-200:],
                        seconds,
                    )
                )
            )
            continue
        perf = problem.get("performance") or {}
        ok = ("verdict" not in entry or problem["status"] == entry["verdict"]) and (
            "score" not in entry or abs(problem["score"] - entry["score"]) < 1e-3
        )
        if "performance" in entry:
            ok &= perf.get("status") in entry["performance"] and not perf.get("score")
        if "measured_below" in entry or entry.get("honest"):
            ok &= perf.get("status") == "measured" and all(
                s["ratio"] and s["ratio"] < entry.get("measured_below", 1e9) and not s["flags"]
                for s in perf.get("shapes", [])
            )
        rows.append(
            show(
                (
                    f"`{entry['name']}`",
                    entry["problem"],
                    "; ".join(e for e in expected if e),
                    ok,
                    describe(problem),
                    seconds,
                )
            )
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="comma-separated entry names")
    parser.add_argument("--skip-honest", action="store_true")
    parser.add_argument("--skip-adversarial", action="store_true")
    parser.add_argument("--untimed", default="", help="honest entries graded with --no-timing (correctness only)")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    base = args.out / "work"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    header = ["| entry | problem | expected | got | match | s |", "| --- | --- | --- | --- | --- | ---: |"]
    print("\n".join(header), flush=True)
    rows = [] if args.skip_adversarial else adversarial_rows(base, only)
    rows += [] if args.skip_honest else honest_rows(base, only, {n for n in args.untimed.split(",") if n})
    lines = header + [
        f"| {r[0]} | {r[1]} | {r[2]} | {r[4] if len(r) > 4 else ''} | {'yes' if r[3] else '**NO**'} | "
        f"{r[5] if len(r) > 5 else 0:.0f} |"
        for r in rows
    ]
    table = "\n".join(lines)
    (args.out / "corpora.md").write_text(table + "\n")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
