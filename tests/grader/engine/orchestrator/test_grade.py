"""The worker boundary: whatever a submission does, the other problems are graded and a result is written."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from grader.cli import main
from grader.engine.assignment.load import load_assignment
from grader.engine.sandbox.processes import run_state
from tests.spec_support import spec_with_limit

ROOT = Path(__file__).resolve().parents[4]
CORRECT_GELU = (Path(__file__).resolve().parents[4] / "examples" / "submissions" / "correct" / "gelu.py").read_text()


def grade(folder: Path, out: Path, *extra: str) -> dict:
    assert main(["grade", str(folder), "--out", str(out), *extra]) == 0
    return json.loads((out / "result.json").read_text())


def by_name(result: dict) -> dict[str, dict]:
    return {p["name"]: p for p in result["problems"]}


def test_import_error_exit_and_hang_cost_only_their_problem(make_submission, tmp_path: Path) -> None:
    folder = make_submission(
        gelu=CORRECT_GELU,
        softmax="raise ImportError('no such thing')\n",
        matmul="import sys\nsys.exit(4)\n",
        flash_attention="import time\ndef flash_attention(q, k, v, is_causal=False):\n    while True:\n        "
        "time.sleep(0.1)\n",
    )
    spec = spec_with_limit(tmp_path / "spec", "flash_attention", 8)
    result = grade(folder, tmp_path / "out", "--spec", str(spec))
    problems = by_name(result)
    assert list(problems) == [p.name for p in load_assignment(hidden=False).problems]
    assert problems["gelu"]["status"] == "passed" and problems["gelu"]["score"] == 10
    assert problems["softmax"]["status"] == "error" and "ImportError: no such thing" in problems["softmax"]["message"]
    assert problems["matmul"]["status"] == "error" and "sys.exit(4)" in problems["matmul"]["message"]
    flash = problems["flash_attention"]
    assert flash["status"] == "error" and flash["score"] == 0
    assert "time limit of 8 s" in flash["tests"][0]["message"]
    assert result["score"] == 10
    assert (tmp_path / "out" / "report.html").exists() and (tmp_path / "out" / "gradescope" / "results.json").exists()


def test_a_workers_imports_are_not_the_problems_time(make_submission, tmp_path: Path) -> None:
    """A limit shorter than a worker's imports (Python, PyTorch, Triton: seconds, more on a loaded
    machine): the correct kernel still passes, since nothing of the submission ran while they took."""
    folder = make_submission(gelu=CORRECT_GELU)
    # the public cases only: their calls stay well inside the limit on a loaded machine (ten did not)
    gelu = by_name(grade(folder, tmp_path / "out", "--problems", "gelu", "--timeout", "2", "--public-only"))["gelu"]
    if gelu["phases"]["worker_start_s"] <= 2:
        pytest.skip("this machine imported within the limit: the test shows nothing here")
    assert gelu["status"] == "passed", [t["message"] for t in gelu["tests"] if t["status"] != "passed"]


def _workers() -> set[int]:
    """This process's children that are workers (a grading also starts the reaper of its scope)."""
    kids = {pid for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()}
    workers = set()
    for pid in kids:
        try:
            if b"\0--problem\0" in Path(f"/proc/{pid}/cmdline").read_bytes():
                workers.add(int(pid))
        except OSError:
            pass  # ended meanwhile
    return workers


def test_every_problems_worker_starts_with_the_grading(make_submission, tmp_path: Path) -> None:
    """Each problem's worker imports (seconds of PyTorch and Triton) beside the others' from the
    start, not when its problem's turn comes: at gelu's first case softmax's worker is running."""
    from grader.engine.orchestrator.grade import grade as grade_in_process
    from grader.engine.orchestrator.options import GradeOptions

    folder = make_submission(gelu=CORRECT_GELU, softmax="raise ImportError('no such thing')\n")
    before = _workers()
    seen: list[int] = []
    said: list[str] = []

    def progress(text: str) -> None:
        if not seen:
            seen.append(len(_workers() - before))
        said.append(text)

    options = GradeOptions(device="cpu", problems=["gelu", "softmax"], progress=progress)
    result = grade_in_process(load_assignment(hidden=False), folder, options)
    assert seen == [2], f"workers alive at gelu's first case: {seen}"
    gelu = [t for t in said if t.startswith("gelu ")]  # the terminal's status line: cases done of cases
    cases = len(gelu)  # one line as each of the CPU's cases ends
    assert gelu[0].startswith(f"gelu 1/{cases}: ") and gelu[-1].startswith(f"gelu {cases}/{cases}: "), gelu
    assert gelu[-1].endswith(" passed")
    problems = {p.name: p for p in result.problems}
    assert problems["gelu"].status == "passed"
    assert problems["softmax"].status == "error" and "no such thing" in problems["softmax"].message
    assert not _workers() - before, "a worker outlived its grading"


def test_a_hung_call_steps_aside_for_every_timer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundled broken matmul never returns. It held the GPU's lease for its whole time limit, and
    every other grading of a class on the H200 waited behind the timer it blocked (a batch of the
    examples stalled for minutes). Under a real lease (a folder of the test's; the device is this CPU)
    a timer that asks while the call is in flight gets the GPU within the grace, with the worker
    stopped, and the call still ends at its time limit."""
    from grader.engine.orchestrator import gpu_lease
    from grader.engine.orchestrator.grade import grade as grade_in_process
    from grader.engine.orchestrator.options import GradeOptions

    monkeypatch.setenv(gpu_lease.ENV, str(tmp_path / "locks"))
    lease = gpu_lease.GpuLease("gpu-test")
    monkeypatch.setattr(gpu_lease, "for_device", lambda device: lease)
    before = _workers()
    done = threading.Event()
    windows: list[tuple[float, list[str]]] = []

    def timer() -> None:
        while not done.is_set():
            asked = time.monotonic()
            with lease.exclusive():
                windows.append((time.monotonic() - asked, [run_state(pid) for pid in _workers() - before]))
                time.sleep(0.2)
            time.sleep(0.5)

    thread = threading.Thread(target=timer, daemon=True)
    thread.start()
    try:
        options = GradeOptions(device="cpu", problems=["matmul"], timeout=10)
        result = grade_in_process(load_assignment(hidden=False), ROOT / "examples" / "submissions" / "broken", options)
    finally:
        done.set()
        thread.join()
    first = result.problems[0].tests[0]
    assert first.status == "error" and "time limit of 10 s" in first.message, first.message
    # from the first window that found the call in flight (its worker stopped) to the worker's end
    start = next((i for i, (_, states) in enumerate(windows) if "T" in states), len(windows))
    during = [(wait, states) for wait, states in windows[start:] if states]
    assert len(during) >= 3, windows
    assert all(set(states) <= {"T", "t"} for _, states in during), f"a worker ran beside a timer: {windows}"
    assert max(wait for wait, _ in windows) < gpu_lease.STEP_ASIDE_AFTER_S + 3, windows


def test_crash_in_call_restarts_a_fresh_worker(make_submission, tmp_path: Path) -> None:
    """os._exit and a segfault in the call: the problem errors with the reason, the next problem runs."""
    folder = make_submission(
        gelu="import os\ndef triton_gelu(x):\n    os._exit(7)\n",
        softmax="import ctypes\ndef triton_softmax(x):\n    ctypes.string_at(0)\n",
    )
    problems = by_name(grade(folder, tmp_path / "out", "--problems", "gelu,softmax", "--timeout", "60"))
    gelu = problems["gelu"]["tests"]
    assert all(t["status"] == "error" for t in gelu)
    assert "exited with code 7" in gelu[0]["message"]
    assert any("worker crashed" in t["message"] for t in gelu), "stops restarting after a few crashes"
    assert "SIGSEGV" in problems["softmax"]["tests"][0]["message"]


def test_stub_scores_zero_with_not_implemented_message(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[4]
    result = grade(root / "student_template", tmp_path / "out")
    assert result["score"] == 0
    for problem in result["problems"]:
        assert problem["score"] == 0
        for test in problem["tests"]:
            assert "NotImplementedError" in test["message"], (problem["name"], test)


def test_bad_path_and_bad_spec_exit_2(tmp_path: Path) -> None:
    assert main(["grade", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    bad = tmp_path / "assignment.toml"
    bad.write_text("[assignment]\nname = 1\n")
    assert main(["grade", str(tmp_path), "--out", str(tmp_path / "o"), "--spec", str(bad)]) == 2


def test_problems_checked_at_once_grade_as_one_at_a_time(make_submission, tmp_path: Path) -> None:
    """--parallel: the same verdicts and messages as one problem after another, a hang included."""
    folder = make_submission(
        gelu=CORRECT_GELU,
        softmax="raise ImportError('no such thing')\n",
        flash_attention="import time\ndef flash_attention(q, k, v, is_causal=False):\n    while True:\n        "
        "time.sleep(0.1)\n",
    )
    args = (
        "--problems",
        "gelu,softmax,flash_attention",
        "--spec",
        str(spec_with_limit(tmp_path / "spec", "flash_attention", 10)),
    )
    together = by_name(grade(folder, tmp_path / "a", *args, "--parallel", "3"))
    apart = by_name(grade(folder, tmp_path / "b", *args, "--parallel", "1"))
    assert list(together) == list(apart) == ["gelu", "softmax", "flash_attention"]
    for name in together:
        assert together[name]["score"] == apart[name]["score"]
        assert [(t["name"], t["status"]) for t in together[name]["tests"]] == [
            (t["name"], t["status"]) for t in apart[name]["tests"]
        ]
    assert together["gelu"]["score"] == 10
    assert "time limit of 10 s" in together["flash_attention"]["tests"][0]["message"]


def test_parallel_must_be_a_positive_whole_number(tmp_path: Path, capsys) -> None:
    import pytest

    root = Path(__file__).resolve().parents[4]
    with pytest.raises(SystemExit) as stop:
        main(["grade", str(root / "student_template"), "--out", str(tmp_path), "--parallel", "0"])
    assert stop.value.code == 2
    assert "--parallel: expected a whole number >= 1, got 0" in capsys.readouterr().err


def test_profile_needs_a_gpu_and_says_so(make_submission, tmp_path: Path, capsys) -> None:
    import torch

    if torch.cuda.is_available():
        import pytest

        pytest.skip("on a GPU the profile is made: test_profile_lists_the_students_kernel")
    result = grade(make_submission(gelu=CORRECT_GELU), tmp_path / "out", "--problems", "gelu", "--profile")
    assert by_name(result)["gelu"]["profile"] == []
    printed = capsys.readouterr()
    assert "profiles need a CUDA GPU" in " ".join((printed.out + printed.err).split())


def test_profile_lists_the_students_kernel(make_submission, tmp_path: Path) -> None:
    import pytest
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    folder = make_submission(gelu=CORRECT_GELU)
    result = grade(folder, tmp_path / "out", "--problems", "gelu", "--profile", "--no-timing")
    shapes = by_name(result)["gelu"]["profile"]
    assert [s["name"] for s in shapes] == [c.name for c in load_assignment().problem("gelu").benchmarks]
    for shape in shapes:
        assert not shape["error"] and shape["kernels_ms"] > 0 and shape["wall_ms"] >= shape["kernels_ms"] * 0.5
        assert any("gelu" in k["name"].lower() for k in shape["kernels"]), shape["kernels"]
