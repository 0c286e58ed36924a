"""The handout's benchmark timer: pytest-benchmark reports exactly the rounds the grader's loop timed.

Driven through a real pytest run with the real pytest-benchmark plugin (on CPU: the samples are
given, since timing them needs a GPU; tests/test_handout.py times them on the GPU).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.handout_support import SampleReplay

ROOT = Path(__file__).resolve().parents[2]

REPLAYED = '''
import pytest
from grader.handout_support import REPLAY

SAMPLES = [3e-3, 1e-3, 2e-3, 5e-3, 4e-3, 2.5e-3]

@pytest.mark.benchmark(timer=REPLAY, min_rounds=1, warmup=False)
def test_replayed(benchmark):
    REPLAY.load(SAMPLES)
    benchmark.pedantic(lambda: None, rounds=len(SAMPLES), warmup_rounds=0)
    assert REPLAY.spent
'''


def test_pytest_benchmark_keeps_the_replayed_rounds(tmp_path: Path) -> None:
    (tmp_path / "test_replayed.py").write_text(REPLAYED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--benchmark-only", "--benchmark-json=out.json", "test_replayed.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
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
