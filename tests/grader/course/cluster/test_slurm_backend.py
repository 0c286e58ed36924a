"""`grader batch --backend slurm` on a real single-node Slurm (scripts/setup-slurm.sh starts it).

The class goes in as one job array with a (stand-in) GPU per element. One element is requeued
while it grades, as Slurm does when a node fails; the batch must still end with every student
graded once, as the local backend grades them, and a second run must grade nothing again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.grader.backend_support import batch, grades, local_gradebook, rows, stamps, start_batch

pytest.importorskip("submitit", reason="submitit is not installed (pip install '.[cluster]')")


def _slurm_ready() -> str:
    """Why Slurm cannot run jobs here, or '' when it can."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "no Slurm here (scripts/setup-slurm.sh installs and starts one, as root)"
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20).stdout.split()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"sinfo does not answer: {exc}"
    if not any(s.rstrip("*~#") in ("idle", "mixed", "allocated", "completing") for s in states):
        return f"no Slurm node can take jobs (states: {states or 'none'}); run scripts/setup-slurm.sh"
    return ""


pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(_slurm_ready()), reason=_slurm_ready() or "Slurm is ready")]


def _processes() -> list[tuple[int, int, str, dict[str, str]]]:
    """(pid, parent pid, command line, environment) of every process this user can read."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            raw = (proc / "environ").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found.append((int(proc.name), ppid, cmdline, dict(e.split("=", 1) for e in raw.split("\0") if "=" in e)))
    return found


def _grading(out: Path, students: list[str]) -> tuple[str, str] | None:
    """(array element, student) of an element of this batch that is grading now: its sandboxed
    worker runs. Element i grades the i-th student in order (the array follows the class)."""
    procs = _processes()
    parents = {ppid for _pid, ppid, _cmd, _env in procs}
    for pid, _ppid, cmdline, env in procs:
        if "submitit" in cmdline and env.get("SLURM_ARRAY_JOB_ID") and str(out) in cmdline and pid in parents:
            task = int(env["SLURM_ARRAY_TASK_ID"])
            return f"{env['SLURM_ARRAY_JOB_ID']}_{task}", students[task]
    return None


def _requeue_now(element: str) -> None:
    """What Slurm does to a job whose node failed: kill it and queue it again (now, not in 2 minutes)."""
    subprocess.run(["scontrol", "requeue", element], check=True, capture_output=True, timeout=30)
    for _ in range(40):
        state = subprocess.run(
            ["squeue", "-h", "-r", "-j", element, "-o", "%T"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
        if state == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={element}", "StartTime=now"], capture_output=True, timeout=30)
            return
        time.sleep(0.5)
    raise AssertionError(f"{element} was not requeued (squeue: {state!r})")


def test_job_array_with_a_requeued_element(tmp_path: Path) -> None:
    expected = local_gradebook(tmp_path / "local")

    out = tmp_path / "slurm"
    argv = ["--backend", "slurm", "--slurm-gpus-per-task", "1", "--slurm-option", "comment=grader-ci"]
    driver = start_batch(out, *argv)
    deadline = time.monotonic() + 240
    while (running := _grading(out, sorted(expected))) is None:
        assert driver.poll() is None, f"the batch ended before any element graded:\n{driver.communicate()[0][-3000:]}"
        assert time.monotonic() < deadline, "no array element started grading"
        time.sleep(0.3)
    element, student = running
    _requeue_now(element)
    text, _ = driver.communicate(timeout=480)
    assert driver.returncode == 0, text[-4000:]

    assert grades(out) == expected, text[-3000:]
    book = rows(out)
    assert all(r["error"] == "" and r["gpu"].startswith("cpu (node ") for r in book), book
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["mode"], summary["missing"], summary["gpus_per_task"]) == ("slurm", 0, 1)
    # one array for the class, the requeued element ran twice, the secret's folder is private
    arrays = json.loads((out / ".slurm" / "array.json").read_text())["jobs"]
    assert len(arrays) == 1 and element.startswith(arrays[0] + "_")
    log = next((out / ".slurm").glob(f"{element}/*_log.out")).read_text()
    assert "DUE TO JOB REQUEUE" in log, log[-2000:]
    assert (out / ".slurm").stat().st_mode & 0o077 == 0
    assert (out / student / "result.json").is_file()

    before = stamps(out)
    batch(out, *argv)  # resume: nothing is queued or written again
    assert stamps(out) == before and rows(out) == book
