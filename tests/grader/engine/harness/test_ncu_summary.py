"""Nsight Compute's counters in the profile mode (`grader.engine.harness.ncu_summary`).

On a CPU machine there is no `ncu`: its CSV is parsed from text in the shape ncu 2025 writes, and
the plumbing (the command, the log file, the reasons) runs against a stand-in program that writes
what ncu would. The real `ncu` runs in the GPU test at the end.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.engine import protocol
from grader.engine.harness import ncu_summary
from grader.engine.orchestrator import profiles

ROOT = Path(__file__).resolve().parents[4]
METRIC_NAMES = list(ncu_summary.METRICS)


def raw_csv(rows: list[tuple[str, dict[str, str]]]) -> str:
    """ncu's raw page: its own log lines, a header, a units row, one row per launch."""
    fixed = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size"]
    header = fixed + METRIC_NAMES
    units = [""] * len(fixed) + ["nsecond", "%", "%", "byte", "%", "register/thread"]
    lines = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)", ",".join(f'"{h}"' for h in header)]
    lines.append(",".join(f'"{u}"' for u in units))
    for i, (name, values) in enumerate(rows):
        cells = [str(i), "4242", "python3.12", "127.0.0.1", name, "1", "7", "(1024, 1, 1)"]
        cells += [values.get(m, "n/a") for m in METRIC_NAMES]
        lines.append(",".join(f'"{c}"' for c in cells))
    return "\n".join(lines) + "\n"


def launch(time_ns: float, sm: float, mem: float, dram: float, occ: float, regs: int) -> dict[str, str]:
    values = [time_ns, sm, mem, dram, occ, regs]
    return {m: f"{v:,}" if isinstance(v, int) else str(v) for m, v in zip(METRIC_NAMES, values)}


def test_launches_are_summed_by_kernel_and_percentages_weighted_by_time() -> None:
    text = raw_csv(
        [
            ("softmax_kernel", launch(1_000_000, 20.0, 90.0, 4.0e9, 60.0, 32)),
            ("softmax_kernel", launch(3_000_000, 40.0, 70.0, 12.0e9, 80.0, 32)),
            ("fill_kernel", launch(10_000, 5.0, 50.0, 1.0e6, 90.0, 16)),
        ]
    )
    kernels = ncu_summary.parse(text)
    assert [k.name for k in kernels] == ["softmax_kernel", "fill_kernel"]
    soft = kernels[0]
    assert soft.launches == 2 and soft.time_s == pytest.approx(4e-3)
    assert soft.sm_pct == pytest.approx(35.0) and soft.memory_pct == pytest.approx(75.0)
    assert soft.dram_gb_s == pytest.approx(16e9 / 4e-3 / 1e9) and soft.registers == 32
    assert soft.occupancy_pct == pytest.approx(75.0)


def test_a_missing_or_garbled_value_leaves_that_counter_empty() -> None:
    values = launch(2_000_000, 50.0, 60.0, 1e9, 70.0, 40)
    values["sm__throughput.avg.pct_of_peak_sustained_elapsed"] = "n/a"
    values["dram__bytes.sum"] = "nan"
    kernels = ncu_summary.parse(raw_csv([("k", values)]))
    assert kernels[0].sm_pct is None and kernels[0].dram_gb_s is None and kernels[0].memory_pct == 60.0


def test_no_table_is_no_kernels_and_the_table_is_bounded() -> None:
    assert ncu_summary.parse("==PROF== Disconnected\n") == []
    assert ncu_summary.parse('"ID","Kernel Name"\n') == []
    many = raw_csv([(f"kernel_{i}", launch(1000 + i, 1, 1, 1, 1, 1)) for i in range(50)])
    kernels = ncu_summary.parse(many)
    assert len(kernels) == protocol.MAX_COUNTED_KERNELS and kernels[0].name == "kernel_49"
    long = ncu_summary.parse(raw_csv([("x" * 5000, launch(1, 1, 1, 1, 1, 1))]))
    assert len(long[0].name) <= 160


def test_why_not_names_the_driver_setting_or_ncus_own_error() -> None:
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert "NVreg_RestrictProfilingToAdminUsers" in ncu_summary.why_not(perm, 1)
    assert "launched no kernel" in ncu_summary.why_not("==WARNING== No kernels were profiled.", 0)
    assert "Failed to initialize" in ncu_summary.why_not("==ERROR== Failed to initialize the profiler\n", 1)
    assert "exit status 9" in ncu_summary.why_not("", 9)


def test_the_command_profiles_only_the_call_and_leaves_the_clocks_alone(tmp_path: Path) -> None:
    argv = ncu_summary.command("/opt/ncu", tmp_path / "log.csv", ["sub", "gelu", "gelu", "triton_gelu", "{}"])
    assert argv[0] == "/opt/ncu" and argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--log-file") + 1] == str(tmp_path / "log.csv")
    assert argv[argv.index("--metrics") + 1].split(",") == METRIC_NAMES
    assert argv[argv.index(sys.executable) + 1] == "-I" and argv[-5:] == ["sub", "gelu", "gelu", "triton_gelu", "{}"]


STAND_IN = """#!{python}
# a stand-in for ncu on a machine without it: writes into --log-file what the test asks for
import sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
open(log, "w").write(open({content!r}).read())
print("==ERROR== ERR_NVGPUCTRPERM" if {refuse} else "", file=sys.stderr)
sys.exit(1 if {refuse} else 0)
"""


def stand_in(tmp_path: Path, content: str, refuse: bool = False) -> str:
    (tmp_path / "content.csv").write_text(content)
    program = tmp_path / "ncu"
    program.write_text(STAND_IN.format(python=sys.executable, content=str(tmp_path / "content.csv"), refuse=refuse))
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return str(program)


def request() -> protocol.ProfileRequest:
    return protocol.ProfileRequest(case={"name": "x"}, seed=1, sets=1)


def test_summarize_reads_the_log_file_or_says_why_not(tmp_path: Path) -> None:
    good = stand_in(tmp_path, raw_csv([("gelu_kernel", launch(5_000, 10, 95, 8e6, 88, 24))]))
    kernels, note = ncu_summary.summarize(good, tmp_path, "gelu", "gelu", "triton_gelu", request())
    assert note == "" and kernels[0].name == "gelu_kernel" and kernels[0].memory_pct == 95
    refused = stand_in(tmp_path, "", refuse=True)
    kernels, note = ncu_summary.summarize(refused, tmp_path, "gelu", "gelu", "triton_gelu", request())
    assert kernels == [] and "administrators" in note
    kernels, note = ncu_summary.summarize(str(tmp_path / "absent"), tmp_path, "gelu", "gelu", "f", request())
    assert kernels == [] and note.startswith("Nsight Compute could not start")


def test_the_orchestrator_finds_ncu_or_is_told_not_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    program = stand_in(tmp_path, "")
    monkeypatch.setenv(profiles.NCU_ENV, program)
    assert profiles.ncu_program() == str(Path(program).resolve())
    monkeypatch.setenv(profiles.NCU_ENV, "off")
    assert profiles.ncu_program() is None
    monkeypatch.setenv(profiles.NCU_ENV, str(tmp_path / "not-a-program"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    found = profiles.ncu_program()  # not the configured path: the next candidate, if this machine has one
    assert found is None or (found.endswith("/ncu") and "not-a-program" not in found)


def test_profile_records_carry_the_counters_or_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from grader.engine.assignment.load import load_assignment
    from grader.engine.problems import REGISTRY

    problem = load_assignment().problem("gelu")
    monkeypatch.setenv(profiles.NCU_ENV, stand_in(tmp_path, ""))
    counted = protocol.KernelCounters(name="gelu_kernel", launches=1, time_s=2e-4, sm_pct=12.0, registers=20)
    asked: list[protocol.ProfileRequest] = []

    def worker(req: protocol.ProfileRequest) -> tuple[protocol.Profiled, None]:
        asked.append(req)
        return protocol.Profiled(kernels=[], wall_s=3e-4, counters=[counted]), None

    shapes = profiles.profile_shapes(problem, REGISTRY["gelu"], "s", worker)
    assert asked[0].ncu and shapes[0].counters[0].time_ms == 0.2 and shapes[0].counters[0].registers == 20
    monkeypatch.setenv(profiles.NCU_ENV, "off")
    shapes = profiles.profile_shapes(problem, REGISTRY["gelu"], "s", worker)
    assert asked[-1].ncu is None and "not installed" in shapes[0].counters_note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or profiles.ncu_program() is None, reason="needs a GPU and ncu")
def test_a_real_grading_profiles_the_students_kernels_under_ncu(tmp_path: Path) -> None:
    """`grader grade --profile` on the bundled correct GeLU: each benchmark shape's Triton kernel
    with its counters, from the worker's sandbox, or the driver's reason on a machine that keeps
    the counters to administrators."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli", "grade", str(ROOT / "examples/submissions/correct"), "--out", str(out),
         "--problems", "gelu", "--profile", "--no-timing"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    print(done.stdout[-6000:])  # the tables a student reads (pytest -s shows them)
    shapes = json.loads((out / "result.json").read_text())["problems"][0]["profile"]
    assert shapes
    for shape in shapes:
        if shape["counters"]:
            top = shape["counters"][0]
            assert "gelu" in top["name"].lower() and top["time_ms"] > 0 and top["memory_pct"] > 10, shape
        else:
            assert "administrators" in shape["counters_note"], shape
