"""Nsight Compute's view of one warm call, kernel by kernel: the `profile` mode's hardware counters.

The PyTorch profiler (`kernel_profile`) says where a call's time goes; Nsight Compute says why:
how close each kernel came to the GPU's compute and memory ceilings, the DRAM bandwidth it drew,
its occupancy and registers. `ncu` can only start a program, not join one, so the worker starts a
child under it: the same interpreter, sandbox, uid and Triton cache, the submission imported the
same way, the shape's inputs drawn from the same seed. The child warms the shape up with the
profiler off (`--profile-from-start off`), then runs one call between cudaProfilerStart and Stop.
The clocks are left alone (`--clock-control none`: the lent H200's rule, and what timing sees).

What comes back is read from a file the child's process tree wrote, so it is the submission's
data: parsed defensively, bounded, and judged by nothing. A machine without `ncu`, or whose driver
keeps the counters to administrators, gets a one-line reason instead.
"""

from __future__ import annotations

import csv
import io
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grader.engine import protocol

ROOT = Path(__file__).resolve().parents[3]
#: kernel launches profiled per call (each is replayed once per counter pass)
LAUNCHES = 40
#: the child's whole run under ncu (imports, warm-up with compiles, the replayed launches)
CHILD_LIMIT_S = 180.0
MAX_LOG_BYTES = 4 << 20

#: ncu metric -> the KernelCounters field it fills
METRICS = {
    "gpu__time_duration.sum": "time_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "memory_pct",
    "dram__bytes.sum": "dram_bytes",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "launch__registers_per_thread": "registers",
}

CHILD = (
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "from grader.engine.harness import ncu_child\n"
    "sys.exit(ncu_child.main(sys.argv[1:]))\n"
)


def command(ncu: str, log: Path, args: list[str]) -> list[str]:
    """ncu over the child: raw counters as CSV into `log`, only between the profiler's start and stop."""
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(METRICS),
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--launch-count",
        str(LAUNCHES),
        "--log-file",
        str(log),
        sys.executable,
        "-I",
        "-c",
        CHILD,
        str(ROOT),
        *args,
    ]


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse(text: str) -> list[protocol.KernelCounters]:
    """ncu's raw CSV page (a header, a units row, a row per launch) -> one line per kernel name, the
    longest first: times and bytes summed over its launches, percentages time-weighted."""
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    if len(rows) < 3:
        return []
    header = rows[0]
    column = {name: i for i, name in enumerate(header)}
    name_at = column.get("Kernel Name")
    if name_at is None:
        return []
    sums: dict[str, dict[str, Any]] = {}
    for row in rows[2:]:
        if len(row) != len(header):
            continue
        values = {field: _number(row[column[m]]) for m, field in METRICS.items() if m in column}
        time_ns = values.get("time_ns") or 0.0
        entry = sums.setdefault(row[name_at][:160], {"launches": 0, "time_ns": 0.0, "weighted": {}, "dram": None})
        entry["launches"] += 1
        entry["time_ns"] += time_ns
        if values.get("dram_bytes") is not None:
            entry["dram"] = (entry["dram"] or 0.0) + values["dram_bytes"]
        for field in ("sm_pct", "memory_pct", "occupancy_pct", "registers"):
            if values.get(field) is not None:
                weights = entry["weighted"].setdefault(field, [0.0, 0.0])
                weights[0] += values[field] * max(time_ns, 1.0)
                weights[1] += max(time_ns, 1.0)
    kernels = []
    for name, entry in sums.items():
        mean = {f: w[0] / w[1] for f, w in entry["weighted"].items() if w[1] > 0}
        seconds = entry["time_ns"] / 1e9
        kernels.append(
            protocol.KernelCounters(
                name=name,
                launches=entry["launches"],
                time_s=seconds,
                sm_pct=mean.get("sm_pct"),
                memory_pct=mean.get("memory_pct"),
                dram_gb_s=entry["dram"] / seconds / 1e9 if seconds > 0 and entry["dram"] is not None else None,
                occupancy_pct=mean.get("occupancy_pct"),
                registers=round(mean["registers"]) if "registers" in mean else None,
            )
        )
    kernels.sort(key=lambda k: -k.time_s)
    return kernels[: protocol.MAX_COUNTED_KERNELS]


def why_not(log: str, returncode: int) -> str:
    """The one line a student reads when the counters did not come back."""
    if "ERR_NVGPUCTRPERM" in log:
        return (
            "Nsight Compute: this machine's driver keeps the GPU's counters to administrators "
            "(NVreg_RestrictProfilingToAdminUsers); the PyTorch profile above still holds"
        )
    if "No kernels were profiled" in log:
        return "Nsight Compute: the call launched no kernel it could profile"
    lines = [line.strip() for line in log.splitlines() if line.strip().startswith("==ERROR==")]
    if lines:
        return f"Nsight Compute failed: {lines[0][:300]}"
    return f"Nsight Compute gave no counters (exit status {returncode})"


def summarize(
    ncu: str, submission: Path, problem: str, module: str, function: str, request: protocol.ProfileRequest
) -> tuple[list[protocol.KernelCounters], str]:
    """Run the child under `ncu` for one warm call of the request's shape: (its kernels, or why none)."""
    with tempfile.TemporaryDirectory(prefix="ncu-") as scratch:
        log = Path(scratch) / "ncu.csv"
        args = [str(submission), problem, module, function, request.model_dump_json()]
        try:
            done = subprocess.run(
                command(ncu, log, args),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=CHILD_LIMIT_S,
                cwd=scratch,
            )
        except subprocess.TimeoutExpired:
            return [], f"Nsight Compute: the profiled call did not finish within {CHILD_LIMIT_S:g} s"
        except OSError as exc:
            return [], f"Nsight Compute could not start: {exc.strerror or exc}"
        text = ""
        if log.is_file():
            with log.open("rb") as f:
                text = f.read(MAX_LOG_BYTES).decode(errors="replace")
        kernels = parse(text)
        if kernels:
            return kernels, ""
        said = text + done.stdout[-20000:].decode(errors="replace") + done.stderr[-20000:].decode(errors="replace")
        return [], why_not(said, done.returncode)
