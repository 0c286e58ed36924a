"""What the handout's tests run: a case called exactly as the grader's worker calls it, and the
benchmark timer (pytest-benchmark reports exactly the rounds the grader's loop timed).

The timer is driven through a real pytest run with the real pytest-benchmark plugin (on CPU: the
samples are given, since timing them needs a GPU; tests/test_handout.py times them on the GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from grader.engine.assignment.load import load_assignment
from grader.engine.handout.support import CaseRunner, SampleReplay, cases_for

ROOT = Path(__file__).resolve().parents[4]
CORRECT_GELU = ROOT / "examples" / "submissions" / "correct" / "gelu.py"
# answers a repeat of a case from a cache keyed by the input tensor: the grader's worker gives a
# repeat the first call's tensors with new values, so the cached answer is wrong there
CACHED_GELU = """
from correct_gelu import triton_gelu as _gelu

_answers = {}


def triton_gelu(x):
    return _answers.setdefault(id(x), _gelu(x))
"""


def _submission(tmp_path: Path, gelu: str) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir(parents=True)
    (folder / "correct_gelu.py").write_text(CORRECT_GELU.read_text())
    (folder / "gelu.py").write_text(gelu)
    return folder


def _cpu_case() -> object:
    return load_assignment(hidden=False).problem("gelu").suite_cases("cpu", "public")[0]


def test_a_compile_only_case_says_so_in_its_test_id() -> None:
    ids = [p.id for p in cases_for("softmax", "cpu", None)]
    assert "cpu-past-block-limit-fp32-compile-only" in ids and "cpu-small-fp32" in ids


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU cases, through Triton's interpreter")
def test_the_handout_calls_a_case_as_the_worker_does(tmp_path: Path) -> None:
    honest = CaseRunner(_submission(tmp_path / "honest", CORRECT_GELU.read_text()), "cpu")
    cached = CaseRunner(_submission(tmp_path / "cached", CACHED_GELU), "cpu")
    try:
        honest.check("gelu", _cpu_case())  # type: ignore[arg-type]
        with pytest.raises(pytest.fail.Exception, match="call 2 of 2"):
            cached.check("gelu", _cpu_case())  # type: ignore[arg-type]
        here = [
            n for n, m in list(sys.modules.items()) if str(getattr(m, "__file__", "") or "").startswith(str(tmp_path))
        ]
        assert here == [], "the submission is imported in the problem's process, not here"
    finally:
        honest.close()
        cached.close()


# replace what the checks rely on, at import or inside the call, and still compute GeLU right
TAMPER_AT_IMPORT = """
import torch
from correct_gelu import triton_gelu

torch.allclose = lambda *args, **kwargs: True
"""
TAMPER_IN_CALL = """
import time
from correct_gelu import triton_gelu as _gelu


def triton_gelu(x):
    time.perf_counter = lambda: 0.0
    return _gelu(x)
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU cases, through Triton's interpreter")
@pytest.mark.parametrize(
    ("source", "named"), [(TAMPER_AT_IMPORT, "torch.allclose"), (TAMPER_IN_CALL, "time.perf_counter")]
)
def test_the_handout_reports_tampering_as_the_grader_does(tmp_path: Path, source: str, named: str) -> None:
    """The worker's guard zeroes such a problem; the handout fails its cases with the same words."""
    runner = CaseRunner(_submission(tmp_path / "sub", source), "cpu")
    try:
        with pytest.raises(pytest.fail.Exception, match=f"tampered with the grader's environment: {named}"):
            runner.check("gelu", _cpu_case())  # type: ignore[arg-type]
        assert runner.tampering("softmax") is None, "another problem of the same run is not touched"
    finally:
        runner.close()


def test_the_trusted_side_never_imports_the_worker() -> None:
    code = (
        "import sys, grader.engine.handout.support, grader.engine.orchestrator.grade, "
        "grader.engine.judge.performance, grader.engine.judge.checks; "
        "print('grader.engine.harness.serve' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.strip() == "False", proc.stdout + proc.stderr[-2000:]


REPLAYED = """
import pytest
from grader.engine.handout.support import REPLAY

SAMPLES = [3e-3, 1e-3, 2e-3, 5e-3, 4e-3, 2.5e-3]

@pytest.mark.benchmark(timer=REPLAY, min_rounds=1, warmup=False)
def test_replayed(benchmark):
    REPLAY.load(SAMPLES)
    benchmark.pedantic(lambda: None, rounds=len(SAMPLES), warmup_rounds=0)
    assert REPLAY.spent
"""


def test_pytest_benchmark_keeps_the_replayed_rounds(tmp_path: Path) -> None:
    (tmp_path / "test_replayed.py").write_text(REPLAYED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--benchmark-only",
            "--benchmark-json=out.json",
            "test_replayed.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    (bench,) = json.loads((tmp_path / "out.json").read_text())["benchmarks"]
    stats = bench["stats"]
    assert stats["rounds"] == 6
    assert stats["min"] == pytest.approx(1e-3) and stats["max"] == pytest.approx(5e-3)
    assert stats["median"] == pytest.approx(2.75e-3)
    assert stats["mean"] == pytest.approx(17.5e-3 / 6)


def test_replay_hands_back_each_round_as_start_and_end() -> None:
    replay = SampleReplay()
    replay.load([0.5, 0.25])
    durations = []
    while not replay.spent:
        start = replay()
        durations.append(replay() - start)
    assert durations == [0.5, 0.25]


def test_reading_the_timer_with_nothing_measured_says_how_to_time() -> None:
    with pytest.raises(RuntimeError, match="--benchmark-only"):
        SampleReplay()()
