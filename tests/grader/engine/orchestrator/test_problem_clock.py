"""A problem is charged its own time only: the clock alone, then a slow problem beside others."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from grader.cli import main
from grader.engine.orchestrator import problem_run
from grader.engine.orchestrator.problem_clock import ProblemClock
from tests.spec_support import spec_with_limit

ROOT = Path(__file__).resolve().parents[4]


def test_only_what_runs_inside_a_charge_is_charged() -> None:
    clock = ProblemClock(10.0)
    time.sleep(0.05)  # the grader's own work between requests
    assert clock.used == 0 and clock.left() == 10.0
    with clock.charging("case a"):
        time.sleep(0.05)
        with clock.charging("nested: the outer one's"):
            time.sleep(0.02)
    assert 0.06 <= clock.spent["case a"] < 0.5 and "nested: the outer one's" not in clock.spent
    assert clock.left() == pytest.approx(10.0 - clock.spent["case a"])


def test_an_excused_wait_pushes_the_deadline_and_is_not_charged() -> None:
    clock = ProblemClock(1.0)
    with clock.charging("case a"):
        before = clock.deadline
        time.sleep(0.2)
        clock.excuse(0.2)  # waited for the GPU's lease meanwhile
        assert clock.deadline == pytest.approx(before + 0.2)
    assert clock.spent["case a"] < 0.1
    clock.excuse(5.0)  # between requests: nothing is running, nothing to excuse
    assert clock.left() > 0.9


def test_the_account_names_where_the_time_went_largest_first() -> None:
    clock = ProblemClock(3.0)
    clock.spent.update({"case small": 0.5, "case slow": 2.6, "worker start (the submission imported)": 0.2})
    message = clock.ran_out("during case slow")
    assert message.startswith("the problem's time limit of 3 s ran out during case slow: its own calls took 3.3 s")
    assert message.index("case slow 2.6 s") < message.index("case small 0.5 s")


def _sleepy_softmax(seconds: float) -> str:
    """The correct example's softmax, made to sleep once, on its first call."""
    source = (ROOT / "examples" / "submissions" / "correct" / "softmax.py").read_text()
    return source + (
        "\n\nimport time as _time\n\n_slept_once = []\n_unslept_softmax = triton_softmax\n\n\n"
        "def triton_softmax(x):\n"
        "    if not _slept_once:\n"
        "        _slept_once.append(True)\n"
        f"        _time.sleep({seconds})\n"
        "    return _unslept_softmax(x)\n"
    )


def _grade(folder: Path, out: Path, *extra: str) -> dict[str, dict]:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "softmax,matmul", *extra]) == 0
    return {p["name"]: p for p in json.loads((out / "result.json").read_text())["problems"]}


@pytest.mark.slow
def test_a_slow_problem_within_its_limit_costs_the_others_nothing(
    make_submission, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 49: a softmax that slept 125 s once (inside its 240 s) used to fail every matmul case
    with "the problem's time limit of 600 s ran out" (matmul's worker, spawned at the start, had
    its 120 s imports' bound run out while softmax slept). Every case of both passes now. The same
    at a smaller scale: a 40 s imports' bound (the grading runs in this process), a 50 s sleep."""
    monkeypatch.setattr(problem_run, "IMPORTS_LIMIT_S", 40.0)
    folder = make_submission("correct", softmax=_sleepy_softmax(50))
    problems = _grade(folder, tmp_path / "out")
    for name in ("softmax", "matmul"):
        failed = [(t["name"], t["message"][:300]) for t in problems[name]["tests"] if t["status"] != "passed"]
        assert not failed, failed
        assert problems[name]["score"] == problems[name]["max_score"] - problems[name]["performance"]["max_score"]
    assert problems["softmax"]["duration_s"] >= 50
    # and matmul's worker started the first time (a retry after the grader's own failure would hide it)
    assert "graded again after the grader's own failure" not in problems["matmul"]["output"]


@pytest.mark.slow
def test_a_problem_that_runs_out_of_its_own_time_is_the_only_one_charged(make_submission, tmp_path: Path) -> None:
    folder = make_submission("correct", softmax=_sleepy_softmax(40))
    spec = spec_with_limit(tmp_path / "spec", "softmax", 15)
    problems = _grade(folder, tmp_path / "out", "--spec", str(spec))
    first = problems["softmax"]["tests"][0]
    assert first["status"] == "error", first
    assert "the problem's time limit of 15 s ran out during case" in first["message"]
    case = first["name"].split(": ", 1)[1]
    assert "its own calls took" in first["message"] and f"case {case} " in first["message"]
    assert problems["softmax"]["score"] == 0
    failed = [(t["name"], t["message"][:300]) for t in problems["matmul"]["tests"] if t["status"] != "passed"]
    assert not failed, failed
