"""A class graded on one GPU two ways: several at once (`--jobs auto`) against one at a time.

The class is the given submission folders (default: the bundled examples, the staff reference
graded as a student, and the honest corpus), each graded once per secret. The concurrent batch
runs first, on cold per-student kernel caches, and the serial one after it, on warm ones, so
the speedup printed is a lower bound. For every student and problem timed in both, the
concurrent ratio is printed beside the serial one: the lease (grader/engine/orchestrator/gpu_lease.py)
should leave them within the grading noise, and the reference against itself near 1.

    python benchmarks/class_throughput.py --out /tmp/class [--jobs auto,1] [--secrets a,b] [--problems gelu,softmax]

One-at-a-time grading of a class of 40 is longer than one call to the lent GPU may run (ten
minutes), so the run may be cut and started again with `--resume` on the same machine and `--out`:
each batch then grades only the students it has not graded yet (`grader batch` without
`--regrade`), and each setting's wall time is the sum over the calls (walls.json). `--phase`
runs one setting only. Give the class a `--timeout` (a problem's limit in seconds): the bundled
`broken` example's matmul never returns and would otherwise take its spec limit (600 s) in
each setting. Not under 240: at 120 the honest `cs336-block-pointers` ran out of its limit while
timed, 8 at once on the H200 (its compiles slowed by the others' on 16 cores), which the same
grading alone would not.

    python benchmarks/class_throughput.py --out .out/class --timeout 240 --phase concurrent --together
    timeout 560 python benchmarks/class_throughput.py --out .out/class --timeout 240 --phase serial --resume

`--together` grades the secrets' batches of the concurrent setting at once, each with its share of
the slots, as one batch of the whole class would be: one batch per secret, one after the other,
ends each with its longest gradings running nearly alone (on the H200, session 19, the bundled
`broken` and `cs336-block-pointers` set each secret's wall at about 330 s while the other 23
had finished by 200 s). On a warm machine `BLOCK=check benchmarks/gpu_block.sh`'s `classstart`
and `classwait` steps run the whole benchmark in the background across several calls.

Where even that does not fit a session's GPU time (48 gradings one at a time took about 24
minutes on the H200), `--serial-secrets 1` grades the serial setting under the first secret only
and counts its wall once per secret: the same code under another secret draws other inputs of
the same shapes, so it does the same work (the concurrent gradings under both secrets show how
close their times are). The report says when the serial wall is scaled so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def default_class() -> list[Path]:
    examples = sorted(p for p in (ROOT / "examples" / "submissions").iterdir() if p.is_dir())
    honest = sorted(p for p in (ROOT / "tests" / "honest" / "submissions").iterdir() if p.is_dir())
    return [*examples, ROOT / "reference", *honest]


def build_class(folders: list[Path], secrets: list[str], base: Path) -> dict[str, Path]:
    """One folder of students per secret (a batch has one secret): name -> class folder."""
    classes = {}
    for secret in secrets:
        folder = base / f"class-{secret}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for source in folders:
            shutil.copytree(source, folder / source.name, ignore=shutil.ignore_patterns("__pycache__", "*.md"))
        classes[secret] = folder
    return classes


def start_batch(folder: Path, out: Path, jobs: str, secret: str, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    """`grader batch` of one secret's class, its output to OUT/../SECRET.log (batches run side by side)."""
    cmd = [sys.executable, "-m", "grader.cli", "batch", str(folder), "--out", str(out), "--jobs", jobs]
    cmd += ["--device", args.device] + ([] if args.resume else ["--regrade"])
    cmd += ["--problems", args.problems] if args.problems else []
    cmd += ["--timeout", args.timeout] if args.timeout else []
    cmd += ["--spec", str(args.spec)] if args.spec else []
    env = {**os.environ, "GRADER_SECRET": secret, "PYTHONPATH": str(ROOT)}
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(log_of(out), "wb") as log:
        return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def log_of(out: Path) -> Path:
    return out.parent / f"{out.name}.log"


def run_batches(batches: list[tuple[Path, Path, str, str]], args: argparse.Namespace) -> float:
    """The batches (folder, out, jobs, secret) at once; the wall until the last one ends."""
    started = time.monotonic()
    running = [(start_batch(*b, args), b[1]) for b in batches]
    for proc, _ in running:
        proc.wait()
    wall = time.monotonic() - started
    for proc, out in running:
        text = log_of(out).read_text(errors="replace")
        print(text[-3500:] if proc.returncode else text[-1500:], flush=True)
    return wall


def shared_jobs(jobs: str, ways: int, device: str) -> str:
    """One batch's share of `jobs` when `ways` batches grade at once on the same GPU."""
    if jobs == "auto":
        if device != "cuda":
            return "1"
        from grader.course.batch.concurrency import auto_per_gpu

        return str(max(1, auto_per_gpu() // ways))
    return str(max(1, int(jobs) // ways))


def ratios(out: Path) -> dict[tuple[str, str], float]:
    found = {}
    for result in out.glob("*/result.json"):
        data: dict[str, Any] = json.loads(result.read_text())
        for problem in data.get("problems", []):
            perf = problem.get("performance") or {}
            if perf.get("status") == "measured" and perf.get("ratio_geomean"):
                found[(result.parent.name, problem["name"])] = perf["ratio_geomean"]
    return found


def verdicts(out: Path) -> dict[tuple[str, str], str]:
    """(student, problem) -> its verdict: the problem's status and its performance's, as recorded."""
    found = {}
    for result in out.glob("*/result.json"):
        for problem in json.loads(result.read_text()).get("problems", []):
            perf = (problem.get("performance") or {}).get("status", "-")
            found[(result.parent.name, problem["name"])] = f"{problem.get('status')}/{perf}"
    return found


def verdict_lines(label: str, a: dict[tuple[str, ...], str], b: dict[tuple[str, ...], str]) -> list[str]:
    """How many of the rows graded both ways have the same verdict, and the ones that differ."""
    both = sorted(a.keys() & b.keys())
    differ = [f"{'/'.join(k)}: {a[k]} against {b[k]}" for k in both if a[k] != b[k]]
    return [f"verdicts, {label}: {len(both) - len(differ)} of {len(both)} the same"] + [f"  - {d}" for d in differ]


def held_alone(out: Path) -> float:
    """Seconds the batch's gradings held the GPU alone (their problems' timing phases, summed):
    no concurrency makes a class's wall shorter than this, so one-at-a-time wall over it bounds
    the speedup any `--jobs` can give."""
    total = 0.0
    for result in out.glob("*/result.json"):
        for problem in json.loads(result.read_text()).get("problems", []):
            total += float((problem.get("phases") or {}).get("timing_s") or 0.0)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--jobs", default="auto,1", help="the concurrent setting, then the serial one")
    parser.add_argument("--secrets", default="class-a,class-b", help="each submission is graded once per secret")
    parser.add_argument("--problems", default=None)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run of this script, no timing")
    parser.add_argument("--submissions", nargs="*", type=Path, default=None, help="folders (default: examples, ...)")
    parser.add_argument("--timeout", default=None, help="each problem's limit, s (batch --timeout)")
    parser.add_argument(
        "--together",
        action="store_true",
        help="the concurrent setting grades every secret's batch at once, each with its share of --jobs "
        "(one queue for the class, as one batch of all its students would be)",
    )
    parser.add_argument("--spec", type=Path, default=None, help="assignment.toml (batch --spec; default the repo's)")
    parser.add_argument("--phase", choices=("both", "concurrent", "serial"), default="both")
    parser.add_argument("--resume", action="store_true", help="keep what earlier runs with this --out graded")
    parser.add_argument(
        "--serial-secrets", type=int, default=0, help="grade the serial setting under this many secrets (0: all)"
    )
    args = parser.parse_args()
    secrets = [s for s in args.secrets.split(",") if s]
    serial_secrets = secrets[: args.serial_secrets or len(secrets)]
    classes = build_class(args.submissions or default_class(), secrets, args.out / "work")
    concurrent, serial = args.jobs.split(",")
    walls_file = args.out / "walls.json"
    walls: dict[str, float] = json.loads(walls_file.read_text()) if args.resume and walls_file.is_file() else {}
    seen: dict[str, dict[tuple[str, str, str], float]] = {}
    graded: dict[str, int] = {}
    alone: dict[str, float] = {}
    judged: dict[str, dict[tuple[str, ...], str]] = {}
    for jobs in (concurrent, serial):
        seen[jobs], graded[jobs], alone[jobs], judged[jobs] = {}, 0, 0.0, {}
        chosen = [s for s in classes if jobs != serial or s in serial_secrets]
        outs = {secret: args.out / f"jobs-{jobs}" / secret for secret in chosen}
        if args.phase == "both" or jobs == {"concurrent": concurrent, "serial": serial}[args.phase]:
            together = args.together and jobs == concurrent  # the secrets' batches as one class
            share = shared_jobs(jobs, len(chosen), args.device) if together else jobs
            for group in [chosen] if together else [[secret] for secret in chosen]:
                batches = [(classes[s], outs[s], share, s) for s in group]
                walls[jobs] = walls.get(jobs, 0.0) + run_batches(batches, args)
                walls_file.write_text(json.dumps(walls))  # what a cut run did is kept for --resume
        for secret, out in outs.items():
            seen[jobs].update({(secret, *k): v for k, v in ratios(out).items()})
            judged[jobs].update({(secret, *k): v for k, v in verdicts(out).items()})
            graded[jobs] += len(list(out.glob("*/result.json")))
            alone[jobs] += held_alone(out)
    students = sum(len(list(f.iterdir())) for f in classes.values())
    serial_students = sum(len(list(classes[s].iterdir())) for s in serial_secrets)
    scale = len(secrets) / len(serial_secrets)  # 1 unless --serial-secrets
    wall = {concurrent: walls.get(concurrent, 0.0), serial: walls.get(serial, 0.0) * scale}
    scaled = f", {walls.get(serial, 0.0):.0f} s under {len(serial_secrets)} secret(s) x{scale:g}" if scale != 1 else ""
    lines = [
        f"class: {students} gradings ({len(classes)} secrets); --jobs {concurrent}: {wall[concurrent]:.0f} s "
        f"({graded[concurrent]} graded), --jobs {serial}: {wall[serial]:.0f} s ({graded[serial]} graded{scaled}); "
        f"throughput x{wall[serial] / max(wall[concurrent], 1e-9):.2f}"
        + (
            ""
            if graded[concurrent] == students and graded[serial] == serial_students
            else " (not every grading ran: not comparable)"
        ),
        f"the GPU held alone for timing: {alone[concurrent]:.0f} s at --jobs {concurrent}, "
        f"{alone[serial] * scale:.0f} s at --jobs {serial}; the most any concurrency could give this class: "
        + (f"x{wall[serial] / alone[concurrent]:.2f}" if alone[concurrent] else "n/a (nothing timed)"),
        "",
        f"| secret | student | problem | ratio --jobs {serial} | ratio --jobs {concurrent} | difference |",
        "| --- | --- | --- | ---: | ---: | ---: |",
    ]
    worst = 0.0
    for key in sorted(seen[serial].keys() & seen[concurrent].keys()):
        a, b = seen[serial][key], seen[concurrent][key]
        worst = max(worst, abs(b / a - 1))
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {a:.3f} | {b:.3f} | {100 * (b / a - 1):+.1f}% |")
    lines.append(f"\nlargest difference: {100 * worst:.1f}%\n")
    lines += verdict_lines(f"--jobs {serial} against --jobs {concurrent}", judged[serial], judged[concurrent])
    first, *others = secrets  # the same code under other inputs, in the concurrent setting
    mine = {k[1:]: v for k, v in judged[concurrent].items() if k[0] == first}
    for other in others:
        theirs = {k[1:]: v for k, v in judged[concurrent].items() if k[0] == other}
        lines += verdict_lines(f"{first} against {other} at --jobs {concurrent}", mine, theirs)
    text = "\n".join(lines)
    print(text, flush=True)
    (args.out / "class.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
