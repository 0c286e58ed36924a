"""What a cluster backend costs per submission over the local one: scheduling and result transfer.

A class of N copies of examples/submissions/correct (each with its own comment, so each has its
own content hash and nothing is skipped) is graded on the CPU (--problems gelu) by the local
backend with `--jobs J` (a `grader grade` subprocess per student, J at once) and by each cluster
backend with the same J gradings at once on this machine: Ray (a local instance started for the
batch, one CPU per grading) and Slurm (the single-node cluster of scripts/setup-slurm.sh, one CPU
per element). Local and Ray run the same `grader grade` child per student; a Slurm element is a
process of its own per student and grades in it. So

    overhead per submission = (wall of the backend - wall of local) * J / N

is what the engine adds: scheduling, shipping the files to the node and back (Ray), sbatch,
srun, the element's start and squeue (Slurm), and their start-up, spread over the class. The
machine's other load moves every wall: compare runs made back to back. Usage:

    python benchmarks/cluster_overhead.py --students 20 --jobs 2 --backends ray,slurm
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORRECT = ROOT / "examples" / "submissions" / "correct"


def make_class(folder: Path, students: int) -> Path:
    """N submissions of the same correct code, each a different content hash."""
    for i in range(students):
        copy = folder / f"student{i:03d}"
        shutil.copytree(CORRECT, copy)
        with open(copy / "gelu.py", "a") as handle:
            handle.write(f"\n# submission {i}\n")
    return folder


def grade(subs: Path, out: Path, problems: str, extra: list[str]) -> dict[str, object]:
    argv = [
        sys.executable,
        "-m",
        "grader.cli",
        "batch",
        str(subs),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--problems",
        problems,
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=ROOT,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    rows = list(csv.DictReader(io.StringIO((out / "gradebook.csv").read_text())))
    graded = sum(r["status"] == "graded" for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall_s": round(wall, 1),
        "engine_start_s": summary.get("connect_s", 0.0),
        "graded": graded,
        "students": len(rows),
        "grading_s_sum": round(sum(float(r["duration_s"] or 0) for r in rows), 1),
        "totals": sorted({r["total"] for r in rows}),
    }


def ray_task_costs(out: Path) -> dict[str, float]:
    """Per task, from OUT/.ray/tasks.jsonl: the wait between a free slot on the node and the
    task's start there (scheduling and shipping the files), and from its end there to the driver
    holding the result (result transfer)."""
    tasks = [json.loads(line) for line in (out / ".ray" / "tasks.jsonl").read_text().splitlines() if line.strip()]
    dispatch, transfer = [], []
    for t in tasks:
        freed = [o["ended"] for o in tasks if o["node"] == t["node"] and o is not t and o["ended"] <= t["started"]]
        dispatch.append(t["started"] - max([t["sent"], *freed]))
        transfer.append(t["received"] - t["ended"])
    mean = lambda xs: round(sum(xs) / len(xs), 3)  # noqa: E731
    return {
        "tasks": len(tasks),
        "dispatch_mean_s": mean(dispatch),
        "dispatch_max_s": round(max(dispatch), 3),
        "transfer_mean_s": mean(transfer),
        "transfer_max_s": round(max(transfer), 3),
    }


def _stamp(line: str) -> float:
    found = re.search(r"\((\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+)\)", line)
    assert found, line
    return datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def slurm_element_costs(out: Path, rows: list[dict[str, str]]) -> dict[str, float]:
    """Per element, from submitit's logs: the wait between a free CPU and the element's start
    (scheduling, srun, Python and submitit starting), and its time beyond the grading itself
    (loading the recipe, importing the grader and torch, committing the files)."""
    submitted = (out / ".slurm" / "array.json").stat().st_mtime
    spans = []
    for log in sorted((out / ".slurm").glob("*_*/*_log.out"), key=lambda p: int(p.parent.name.split("_")[1])):
        lines = log.read_text().splitlines()
        start = [_stamp(line) for line in lines if "Starting with JobEnvironment" in line][-1]
        end = [_stamp(line) for line in lines if "Job completed successfully" in line][-1]
        spans.append((start, end))
    dispatch, extra = [], []
    for (start, end), row in zip(spans, sorted(rows, key=lambda r: r["student"])):
        freed = [e for s, e in spans if e <= start]
        dispatch.append(start - max([submitted, *freed]))
        extra.append(end - start - float(row["duration_s"]))
    mean = lambda xs: round(sum(xs) / len(xs), 3)  # noqa: E731
    return {
        "elements": len(spans),
        "dispatch_mean_s": mean(dispatch),
        "dispatch_max_s": round(max(dispatch), 3),
        "beyond_grading_mean_s": mean(extra),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2, help="gradings at once, for every backend")
    parser.add_argument("--backends", default="ray,slurm")
    parser.add_argument("--problems", default="gelu")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="cluster-overhead-"))
    try:
        subs = make_class(work / "class", args.students)
        per_backend = {
            "local": ["--jobs", str(args.jobs)],
            "ray": ["--backend", "ray", "--ray-resources", json.dumps({"CPU": os.cpu_count() / args.jobs})],
            "slurm": ["--backend", "slurm", "--slurm-cpus-per-task", str(max(1, (os.cpu_count() or 2) // args.jobs))],
        }
        results: dict[str, dict[str, object]] = {}
        for backend in ["local", *[b for b in args.backends.split(",") if b]]:
            results[backend] = grade(subs, work / backend, args.problems, per_backend[backend])
            if backend == "ray":
                results[backend]["per_task"] = ray_task_costs(work / backend)
            if backend == "slurm":
                rows = list(csv.DictReader(io.StringIO((work / backend / "gradebook.csv").read_text())))
                results[backend]["per_element"] = slurm_element_costs(work / backend, rows)
            print(f"{backend}: {results[backend]}", flush=True)
        local = float(results["local"]["wall_s"])  # type: ignore[arg-type]
        for backend, numbers in results.items():
            if backend != "local":
                extra = float(numbers["wall_s"]) - local  # type: ignore[arg-type]
                numbers["overhead_per_submission_s"] = round(extra * args.jobs / args.students, 2)
                # the engine's start (a Ray instance started for the batch) is paid once, not per student
                numbers["overhead_per_submission_after_start_s"] = round(
                    (extra - float(numbers["engine_start_s"])) * args.jobs / args.students, 2
                )  # type: ignore[arg-type]
        summary = {
            "students": args.students,
            "jobs": args.jobs,
            "problems": args.problems,
            "cpus": os.cpu_count(),
            "results": results,
        }
        print(json.dumps(summary, indent=2))
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
