"""Both corpora on the GPU as one class, in one table of expected against got.

The honest corpus (tests/honest) must get full correctness and a measured, unflagged performance
on every problem it lists; the adversarial corpus's GPU entries and every honest twin
(tests/adversarial) must get their verdicts. Gradings run `--jobs` at a time (auto: as `grader
batch` chooses, grader/course/batch/concurrency.py): their correctness together, their timing one at a
time through the GPU's lease, exactly as a batch grades a class. Entries marked `alone` (an
attack on the GPU's shared memory) are graded after the others, one at a time. Prints a markdown
table as rows land, says which entries did not run and where the class's time went (each
grading's phases, in --out/phases.json as they land), and writes it under --out. `--reference`
grades the staff reference as a student in the same class (every point, every shape timed).

    python benchmarks/corpora_table.py --out /tmp/corpora [--only NAME,NAME] [--jobs N|auto] [--reference]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import block_rows  # noqa: E402  (what full marks are)
from grader.engine.assignment.load import load_assignment  # noqa: E402
from tests.adversarial import test_corpus as adversarial  # noqa: E402  (its builder and twins)
from tests.honest import test_corpus as honest  # noqa: E402  (what an honest entry's performance must be)

HONEST = ROOT / "tests" / "honest"


def grade(
    submission: Path, out: Path, problems: list[str], extra: list[str], device: str
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
        device,
        *extra,
    ]
    done = subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, errors="replace", env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    result = out / "result.json"
    out.mkdir(parents=True, exist_ok=True)
    (out / "stderr.log").write_text(done.stderr)  # GRADER_TRACE's phases, when set: where the time went
    return (json.loads(result.read_text()) if result.is_file() else None), time.monotonic() - start, done.stderr[-500:]


def describe(problem: dict[str, Any]) -> str:
    perf = problem.get("performance") or {}
    correct = sum(t["score"] for t in problem["tests"])
    ratio = perf.get("ratio_geomean")
    text = f"{problem['status']}, correctness {correct:.2f}, performance {perf.get('status')}"
    if ratio:
        text += f" (ratio {ratio:.3f})"
    if perf.get("status") in ("flagged", "skipped"):
        text += f": {perf.get('reason', '')[:90]}"
    failed = next((t for t in problem["tests"] if t["status"] != "passed"), None)
    if failed is not None:  # what a reader of an unexpected row needs first
        text += f"; first failure: {' '.join(str(failed.get('message', '')).split())[:160]}"
    return text


def show(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row as soon as it is known: a run cut short by its time limit still tells what it saw."""
    print(
        f"| {row[0]} | {row[1]} | {row[2]} | {row[4] if len(row) > 4 else ''} | {'yes' if row[3] else '**NO**'} "
        f"| {row[5] if len(row) > 5 else 0:.0f} |",
        flush=True,
    )
    return row


class Job(NamedTuple):
    """One grading of the table, and what turns its (result, seconds, stderr) into rows."""

    name: str
    submission: Path
    out: Path
    problems: list[str]
    extra: list[str]
    alone: bool  # graded after the others, by itself
    judge: Callable[[dict[str, Any] | None, float, str], list[Any]]


def honest_jobs(base: Path, only: set[str], untimed: set[str]) -> list[Job]:
    jobs: list[Job] = []
    for entry in tomllib.loads((HONEST / "corpus.toml").read_text())["submission"]:
        if only and entry["name"] not in only:
            continue
        sub = base / "honest" / entry["name"] / "submission"
        shutil.copytree(HONEST / "submissions" / entry["name"], sub)
        timed = entry["name"] not in untimed
        judge = _honest_judge(entry, timed)
        extra = [] if timed else ["--no-timing"]
        jobs.append(Job(f"honest {entry['name']}", sub, sub.parent / "out", entry["problems"], extra, False, judge))
    return jobs


def _honest_judge(entry: dict[str, Any], timed: bool) -> Callable[[dict[str, Any] | None, float, str], list[Any]]:
    spec = load_assignment(hidden=False)

    def judge(result: dict[str, Any] | None, seconds: float, err: str) -> list[Any]:
        rows: list[Any] = []
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
            perf_ok = not timed or honest.performance_wrong(entry, name, problem["performance"]) is None
            ok = abs(correct - want) < 1e-3 and perf_ok
            expected = f"full correctness ({want:g})" + (", measured, no flag" if timed else " (run with --no-timing)")
            rows.append(show((f"honest `{entry['name']}`", name, expected, ok, describe(problem), seconds)))
        return rows

    return judge


def reference_job(base: Path, device: str) -> Job:
    """The staff reference graded as a student, in the same class: every point, every benchmark
    shape timed against itself with no flag (the GPU block's row 1, without a call of its own);
    on the CPU, where nothing is timed, every correctness case passed."""
    sub = base / "reference" / "submission"
    shutil.copytree(ROOT / "reference", sub, ignore=shutil.ignore_patterns("__pycache__"))
    problems = [p.name for p in load_assignment(hidden=False).problems]

    def judge(result: dict[str, Any] | None, seconds: float, err: str) -> list[Any]:
        expected = "every point, every shape timed, no flag" if device == "cuda" else "every case passed"
        if result is None:
            return [show(("the staff reference", "all", expected, False, "no result: " + err[-200:], seconds))]
        if device == "cuda":
            wrong = block_rows.full_marks(result)
        else:
            wrong = [
                f"{p['name']} {t['name']} {t['status']}"
                for p in result["problems"]
                for t in p["tests"]
                if t["status"] != "passed"
            ]
        ratios = {p["name"]: (p.get("performance") or {}).get("ratio_geomean") for p in result["problems"]}
        shown = ", ".join(f"{name} {r:.3f}" for name, r in ratios.items() if r)
        got = f"{result['score']:.2f}/{result['max_score']:.0f}" + (f"; ratios {shown}" if shown else "")
        got += "".join(f"; {w}" for w in wrong)
        return [show(("the staff reference", "all", expected, not wrong, got, seconds))]

    return Job("the staff reference", sub, sub.parent / "out", problems, [], False, judge)


def adversarial_jobs(base: Path, only: set[str]) -> list[Job]:
    jobs: list[Job] = []
    for entry in adversarial.CORPUS:
        if not (entry.get("gpu") or entry.get("honest")) or (only and entry["name"] not in only):
            continue
        if entry.get("root") and os.geteuid() != 0:
            continue
        submission, places, args = adversarial._build(entry, base / "adversarial")
        out = Path(places["OUT"])
        extra = args[args.index("--device") + 2 :]
        problems = [entry["problem"], *entry.get("others", {})]
        alone = bool(entry.get("alone"))
        jobs.append(Job(entry["name"], submission, out, problems, extra, alone, _adversarial_judge(entry)))
    return jobs


def _adversarial_judge(entry: dict[str, Any]) -> Callable[[dict[str, Any] | None, float, str], list[Any]]:
    def judge(result: dict[str, Any] | None, seconds: float, err: str) -> list[Any]:
        rows: list[Any] = []
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
            return rows
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

    return judge


def verdict(result: dict[str, Any] | None, name: str) -> dict[str, Any] | None:
    """Problem `name`'s status and correctness fraction in `result` (None: not graded)."""
    problem = next((p for p in (result or {}).get("problems", []) if p["name"] == name), None)
    if problem is None:
        return None
    tests = problem.get("tests", [])
    full = sum(t["max_score"] for t in tests) or 1.0
    return {
        "status": problem["status"],
        "correctness": round(sum(t["score"] for t in tests) / full, 4),
        "failed": [t["name"] for t in tests if t["status"] != "passed"][:20],
    }


def compare_cpu(
    verdicts: dict[str, dict[str, Any] | None], cpu: dict[str, dict[str, Any] | None], gpu_only: set[str]
) -> list[str]:
    """Per entry and problem graded here, the CPU grading's verdict beside this one's, and whether
    they agree (same status, same correctness fraction): the laptop refuses what the GPU refuses
    (issue 30). Keys are "entry|problem"."""
    lines = ["| entry | problem | GPU | CPU | same |", "| --- | --- | --- | --- | --- |"]
    agree = compared = 0
    for key in sorted(verdicts):
        name, problem = key.split("|", 1)
        g, c = verdicts[key], cpu.get(key)
        if g is None or c is None:
            lines.append(f"| {name} | {problem} | {_short(g)} | {_short(c)} | not graded on both |")
            continue
        if name in gpu_only:
            lines.append(f"| {name} | {problem} | {_short(g)} | {_short(c)} | n/a (an attack only a GPU runs) |")
            continue
        same = g["status"] == c["status"] and abs(g["correctness"] - c["correctness"]) < 1e-3
        compared += 1
        agree += same
        lines.append(f"| {name} | {problem} | {_short(g)} | {_short(c)} | {'yes' if same else '**NO**'} |")
    lines += ["", f"CPU and GPU verdicts agree on {agree} of {compared} entry-problems graded on both"]
    return lines


def _short(v: dict[str, Any] | None) -> str:
    return "-" if v is None else f"{v['status']}, correctness {v['correctness']:.2f}"


PHASES = ("worker_start_s", "correctness_s", "warm_s", "timing_s", "checks_s", "gpu_wait_s")


def phase_sums(result: dict[str, Any] | None) -> dict[str, float]:
    """One grading's phases (records.model.Phases) summed over its problems: where its time went."""
    sums = dict.fromkeys(PHASES, 0.0)
    longest = 0.0
    for problem in (result or {}).get("problems", []):
        phases = {name: float((problem.get("phases") or {}).get(name) or 0.0) for name in PHASES}
        for name in PHASES:
            sums[name] += phases[name]
        # a grading's problems are checked side by side (correctness counts its worker's start and
        # its waits), then timed one after another
        longest = max(longest, phases["correctness_s"] + phases["warm_s"] - phases["gpu_wait_s"])
    sums["alone_s"] = longest + sums["timing_s"] + sums["checks_s"]
    return {name: round(value, 2) for name, value in sums.items()}


def class_summary(spent: list[dict[str, Any]]) -> str:
    """The class's time by phase, as `grader batch` prints it (the phases overlap between gradings)."""
    total = {name: sum(row.get(name, 0.0) for row in spent) for name in PHASES}
    wall = max((r["ended_s"] for r in spent), default=0.0)
    # what each grading would take alone, from its phases: an upper bound, since its compiles were
    # slowed by the others' (the correct example: 43.6 s estimated so against 30.5 s alone, H200)
    own = sum(row.get("alone_s", 0.0) for row in spent)
    return (
        f"{len(spent)} gradings, the last ended at {wall:.0f} s: "
        f"worker start {total['worker_start_s']:.0f} s, correctness {total['correctness_s']:.0f} s, "
        f"first calls at the benchmark shapes {total['warm_s']:.0f} s, "
        f"timing {total['timing_s']:.0f} s (alone on the GPU), timed rounds checked {total['checks_s']:.0f} s, "
        f"waiting for the GPU {total['gpu_wait_s']:.0f} s; one at a time, estimated from the phases "
        f"(an upper bound, not run), at most {own:.0f} s: {own / max(wall, 1e-9):.1f}x the wall, and no "
        f"concurrency beyond {own / max(total['timing_s'], 1e-9):.1f}x with timing alone on the GPU"
    )


#: a problem's rough grading cost, for the order of the jobs (flash_attention's 60-175 s alone, gelu's 10 s)
COST = {"flash_attention": 6, "matmul": 3, "softmax": 2, "gelu": 1}


def run_jobs(
    jobs: list[Job], workers: int, device: str, phases_out: Path | None = None
) -> tuple[list[Any], list[str], dict[str, dict[str, Any] | None]]:
    """Every job graded on `device`, `workers` at once (the `alone` ones after, one at a time); rows
    print as they land. Returns the rows, the jobs that did not run, and each "entry|problem"'s verdict;
    each grading's phases go to `phases_out` as it lands."""
    spent: list[dict[str, Any]] = []
    rows: list[Any] = []
    verdicts: dict[str, dict[str, Any] | None] = {}
    lock = threading.Lock()
    done: set[str] = set()
    started = time.monotonic()

    def one(job: Job) -> None:
        result, seconds, err = grade(job.submission, job.out, job.problems, job.extra, device)
        with lock:
            verdicts.update({f"{job.name}|{p}": verdict(result, p) for p in job.problems})
            rows.extend(job.judge(result, seconds, err))
            done.add(job.name)
            if phases_out is not None:
                ended = round(time.monotonic() - started, 2)
                spent.append({"entry": job.name, "wall_s": round(seconds, 2), "ended_s": ended, **phase_sums(result)})
                phases_out.write_text(json.dumps(spent, indent=1) + "\n")  # after every grading: a cut run keeps it

    # the longest first (their problems' usual cost on the H200): a heavy FlashAttention entry
    # left to the end once ran alone for minutes after the rest had finished
    together = sorted((j for j in jobs if not j.alone), key=lambda j: -sum(COST.get(p, 1) for p in j.problems))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, together))
    for job in jobs:
        if job.alone:
            one(job)
    return rows, [j.name for j in jobs if j.name not in done], verdicts


def jobs_at_once(text: str, device: str) -> int:
    """`--jobs auto`: what `grader batch --jobs auto` would run on this GPU (on the CPU, a core each)."""
    if text != "auto":
        return max(1, int(text))
    if device == "cpu":
        return max(1, os.cpu_count() or 1)
    from grader.course.batch.concurrency import auto_per_gpu

    return auto_per_gpu()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", default="", help="comma-separated entry names")
    parser.add_argument("--skip-honest", action="store_true")
    parser.add_argument("--skip-adversarial", action="store_true")
    parser.add_argument(
        "--reference", action="store_true", help="the staff reference graded as a student in the same class"
    )
    parser.add_argument("--untimed", default="", help="honest entries graded with --no-timing (correctness only)")
    parser.add_argument("--jobs", default="auto", help="gradings at once (auto: as grader batch chooses; 1: serial)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="grade on (cpu: verdicts only)")
    parser.add_argument(
        "--cpu-verdicts", type=Path, help="a CPU run's verdicts.json: a table of GPU against CPU verdicts (issue 30)"
    )
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    base = args.out / "work"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    header = ["| entry | problem | expected | got | match | s |", "| --- | --- | --- | --- | --- | ---: |"]
    print("\n".join(header), flush=True)
    jobs = [] if args.skip_adversarial else adversarial_jobs(base, only)
    jobs += [] if args.skip_honest else honest_jobs(base, only, {n for n in args.untimed.split(",") if n})
    jobs += [reference_job(base, args.device)] if args.reference else []
    workers = jobs_at_once(args.jobs, args.device)
    started = time.monotonic()
    phases = args.out / "phases.json"
    rows, missing, verdicts = run_jobs(jobs, workers, args.device, phases)
    wall = time.monotonic() - started
    lines = header + [
        f"| {r[0]} | {r[1]} | {r[2]} | {r[4] if len(r) > 4 else ''} | {'yes' if r[3] else '**NO**'} | "
        f"{r[5] if len(r) > 5 else 0:.0f} |"
        for r in rows
    ]
    summary = (
        f"{len(jobs)} gradings, {workers} at once: {wall:.0f} s of wall time; "
        f"{sum(1 for r in rows if r[3])} of {len(rows)} rows as expected"
    )
    spent = class_summary(json.loads(phases.read_text())) if phases.is_file() else "no grading landed"
    lines += ["", summary, f"did not run: {', '.join(missing)}" if missing else "every entry ran", spent]
    print("\n".join(lines[-4:]), flush=True)
    (args.out / "verdicts.json").write_text(json.dumps(verdicts, indent=1, sort_keys=True) + "\n")
    if args.cpu_verdicts is not None and args.cpu_verdicts.is_file():
        gpu_only = {e["name"] for e in adversarial.CORPUS if e.get("gpu") and not e.get("honest")}
        both = compare_cpu(verdicts, json.loads(args.cpu_verdicts.read_text()), gpu_only)
        print("\n".join(both), flush=True)
        lines += ["", "## CPU against GPU", "", *both]
    (args.out / "corpora.md").write_text("\n".join(lines) + "\n")
    return 0 if all(r[3] for r in rows) and not missing else 1


if __name__ == "__main__":
    sys.exit(main())
