"""The honest corpus: every entry of corpus.toml earns full correctness, graded through the real CLI.

A false zero is as bad as a credited cheat. Each entry is a complete, correct solution of the
problems it lists, written the way students write them; each is graded only on those problems, in
its own `python -m grader.cli grade` process (entries side by side, as the adversarial corpus
does), and checked with `pytest handout` on the same problems, which must agree with the grader.
On CPU (Triton's interpreter) the score must be the correctness points exactly; on a GPU the
correctness points must be full and the performance measured, with no flag.
"""

from __future__ import annotations

import json
import os
import shutil
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine.assignment.load import load_assignment
from grader.engine.records.model import Result
from tests import cli_fork
from tests.cli_fork import ForkedCLI, forking

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPUS: list[dict[str, Any]] = tomllib.loads((HERE / "corpus.toml").read_text())["submission"]
BY_NAME = {e["name"]: e for e in CORPUS}
HAS_GPU = torch.cuda.is_available()
PARALLEL = max(3, min(6, (os.cpu_count() or 2) + 1))
GRADE_LIMIT_S = 900
HANDOUT_LIMIT_S = 900
# scores are sums of per-case shares rounded to 4 decimals (11 cases of 20 points sum to 20.0002)
SCORE_SLACK = 1e-3


GIB = 1 << 30


def performance_wrong(entry: dict[str, Any], problem: str, performance: dict[str, Any] | None) -> str | None:
    """What is wrong with an honest entry's performance on this GPU, or None: measured with no
    flag, every shape's measured peak within its budget (the same budgets on every card: an honest
    entry fits them all, a PyTorch backward included)."""
    if performance is None or performance["status"] != "measured":
        return f"{problem}: performance {performance}"
    flags = {shape["name"]: shape["flags"] for shape in performance["shapes"] if shape["flags"]}
    if flags:
        return f"{problem}: flagged shapes {flags}: {performance['reason']}"
    shapes = performance["shapes"]
    over = [s["name"] for s in shapes if (s.get("peak_gib") or 0) > (s.get("budget_gib") or float("inf"))]
    if over:
        return f"{problem}: peaks over budget at {over}"
    return None


@dataclass
class Run:
    """One entry graded on one device: the CLI's result and `pytest handout`'s, per problem."""

    entry: dict[str, Any]
    device: str
    returncode: int
    stderr: str
    result: dict[str, Any] | None
    handout: dict[str, tuple[int, str]] = field(default_factory=dict)

    def problem(self, name: str) -> dict[str, Any]:
        assert self.result is not None, f"no result.json; the CLI said:\n{self.stderr[-3000:]}"
        found = {p["name"]: p for p in self.result["problems"]}
        assert name in found, f"{name} was not graded: {list(found)}"
        return found[name]


def _cpu_env(device: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # the handout picks the interpreter when it sees no GPU
    return env


def _handout(submission: Path, problem: str, device: str, cli: ForkedCLI | None = None) -> tuple[int, str]:
    """`pytest handout` on one problem's public cases: (exit code, the tail of its output). Its
    memory-budget tests are left out: a budget is a performance rule, and an entry may need more
    than a shape's budget (`gpu_gib`) while its correctness is full."""
    args = [
        f"handout/test_{problem}.py",
        "--submission",
        str(submission),
        "-q",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
    ]
    finished = cli_fork.run(args, env=_cpu_env(device), cwd=ROOT, timeout=HANDOUT_LIMIT_S, via=cli, program="pytest")
    if finished.timed_out:
        return -1, f"pytest handout did not finish in {HANDOUT_LIMIT_S} s"
    return finished.returncode, (finished.stdout + finished.stderr)[-4000:]


def _run(entry: dict[str, Any], base: Path, device: str, cli: ForkedCLI | None = None) -> Run:
    """Grade a copy of the entry (the handout's imports leave __pycache__ behind) and test it."""
    work = base / f"{entry['name']}-{device}"
    submission, out = work / "submission", work / "out"
    shutil.copytree(HERE / "submissions" / entry["name"], submission)
    args = ["grade", str(submission), "--out", str(out), "--problems", ",".join(entry["problems"]), "--device", device]
    finished = cli_fork.run(args, env=_cpu_env(device), cwd=ROOT, timeout=GRADE_LIMIT_S, via=cli)
    code, stderr = finished.grading(GRADE_LIMIT_S)
    result_path = out / "result.json"
    result = json.loads(result_path.read_text()) if result_path.is_file() else None
    run = Run(entry, device, code, stderr, result)
    handout_copy = work / "handout-submission"
    shutil.copytree(HERE / "submissions" / entry["name"], handout_copy)
    run.handout = {p: _handout(handout_copy, p, device, cli) for p in entry["problems"]}
    return run


def _wanted(request: pytest.FixtureRequest, test_name: str) -> list[dict[str, Any]]:
    names = [
        item.callspec.params["name"]
        for item in request.session.items
        if item.module is request.module
        and getattr(item, "originalname", "") == test_name
        and hasattr(item, "callspec")
        and not item.get_closest_marker("skip")
    ]
    return [BY_NAME[n] for n in dict.fromkeys(names)]


@pytest.fixture(scope="module")
def cpu_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The selected entries graded on CPU, side by side."""
    entries = _wanted(request, "test_full_correctness_on_cpu")
    base = tmp_path_factory.mktemp("honest-cpu")
    cli = ForkedCLI(_cpu_env("cpu")) if forking() and entries else None  # imports once (tests/cli_fork.py)
    try:
        with ThreadPoolExecutor(max_workers=PARALLEL) as pool:
            futures = {e["name"]: pool.submit(_run, e, base, "cpu", cli) for e in entries}
            return {name: future.result() for name, future in futures.items()}
    finally:
        if cli is not None:
            cli.close()


@pytest.fixture(scope="module")
def gpu_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The selected entries graded on the GPU, one at a time (as a batch grades one per GPU)."""
    entries = _wanted(request, "test_full_marks_on_gpu")
    base = tmp_path_factory.mktemp("honest-gpu")
    return {e["name"]: _run(e, base, "cuda") for e in entries}


def _correctness_points(problem: str) -> float:
    return load_assignment().problem(problem).points.correctness


def _failures(problem: dict[str, Any]) -> str:
    bad = [f"{t['name']}: {t['status']}: {t['message'][:1500]}" for t in problem["tests"] if t["status"] != "passed"]
    return "\n".join([problem["message"], *bad, problem["output"][-1500:]])


def _check_correct(run: Run) -> list[str]:
    """What keeps the entry from full correctness in the grader and in the handout, problem by problem."""
    assert run.returncode == 0, f"the grader did not finish cleanly ({run.returncode}):\n{run.stderr[-3000:]}"
    assert run.result is not None
    Result.model_validate(run.result)
    wrong = []
    for name in run.entry["problems"]:
        problem = run.problem(name)
        points = _correctness_points(name)
        earned = sum(t["score"] for t in problem["tests"])
        if problem["status"] != "passed" or abs(earned - points) > SCORE_SLACK:
            wrong.append(f"{name}: grader says {problem['status']}, {earned:g} / {points:g}:\n{_failures(problem)}")
        code, said = run.handout[name]
        if code != 0 or " passed" not in said:
            wrong.append(f"{name}: pytest handout exited {code} where the grader says {problem['status']}:\n{said}")
    return wrong


def _param(entry: dict[str, Any], device: str) -> Any:
    marks = []
    if device == "cpu" and not entry.get("cpu", True):
        marks.append(pytest.mark.skip(reason=f"cannot run under Triton's interpreter: {entry['style']}"))
    if device == "cuda":
        marks.append(pytest.mark.gpu)
    return pytest.param(entry["name"], marks=marks, id=entry["name"])


@pytest.mark.parametrize("name", [_param(e, "cpu") for e in CORPUS])
def test_full_correctness_on_cpu(name: str, cpu_runs: dict[str, Run]) -> None:
    """Through the interpreter: every listed problem passes, scores its correctness points, and
    `pytest handout` passes it too; performance is "not measured", so the score is correctness alone."""
    run = cpu_runs[name]
    wrong = _check_correct(run)
    for problem_name in run.entry["problems"]:
        problem = run.problem(problem_name)
        assert problem["performance"] is None or problem["performance"]["status"] == "not_measured", problem[
            "performance"
        ]
        if abs(problem["score"] - _correctness_points(problem_name)) > SCORE_SLACK:
            wrong.append(f"{problem_name}: score {problem['score']} is not the correctness points")
    assert not wrong, "\n\n".join(wrong)


@pytest.mark.parametrize("name", [_param(e, "cuda") for e in CORPUS])
def test_full_marks_on_gpu(name: str, gpu_runs: dict[str, Run]) -> None:
    """On a GPU: full correctness, the handout agrees, and the performance is measured with no flag
    (or, on a card too small for the entry's shapes, fails to fit: `performance_wrong`)."""
    run = gpu_runs[name]
    wrong = _check_correct(run)
    for problem_name in run.entry["problems"]:
        found = performance_wrong(run.entry, problem_name, run.problem(problem_name)["performance"])
        if found:
            wrong.append(found)
    assert not wrong, "\n\n".join(wrong)


def test_corpus_table_matches_the_folders() -> None:
    """Every folder is an entry and every entry a folder, with the fields and real problem names."""
    folders = {p.name for p in (HERE / "submissions").iterdir() if p.is_dir()}
    assert folders == set(BY_NAME), (folders - set(BY_NAME), set(BY_NAME) - folders)
    assert len(CORPUS) == len(BY_NAME), "an entry name is used twice"
    problems = {p.name: p.module for p in load_assignment().problems}
    for entry in CORPUS:
        assert {"name", "style", "problems", "cpu"} <= set(entry), entry["name"]
        assert entry["problems"] and set(entry["problems"]) <= set(problems), (entry["name"], entry["problems"])
        for problem in entry["problems"]:
            module = HERE / "submissions" / entry["name"] / f"{problems[problem]}.py"
            assert module.is_file(), f"{entry['name']} lists {problem} but has no {module.name}"
