"""The timing method: the round planning on any machine, the GPU clock and guards on a GPU."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch

from grader.engine import timing

ROOT = Path(__file__).resolve().parents[3]


def test_rse_and_round_planning() -> None:
    steady = [1.0e-3] * 9 + [1.001e-3]
    assert timing.relative_standard_error(steady) < 1e-3
    assert timing.plan_rounds(steady, budget_s=1.0) == timing.MIN_ROUNDS
    noisy = [1e-3, 2e-3] * 5
    planned = timing.plan_rounds(noisy, budget_s=100.0)
    assert timing.MIN_ROUNDS < planned <= timing.MAX_ROUNDS
    assert timing.plan_rounds(noisy, budget_s=0.02) == 13  # the budget caps it: 20 ms of 1.5 ms rounds
    assert timing.plan_rounds(noisy, budget_s=0.001) == timing.MIN_ROUNDS
    assert timing.relative_standard_error([1.0]) == float("inf")


def test_plan_rounds_keeps_a_floor_of_timed_work() -> None:
    steady = [1e-3] * 10  # no spread: the RSE target alone would stop at the minimum
    assert timing.plan_rounds(steady, budget_s=1.0) == timing.MIN_ROUNDS
    assert timing.plan_rounds(steady, budget_s=1.0, min_s=0.05) == 50
    assert timing.plan_rounds(steady, budget_s=0.0201, min_s=0.05) == 20  # the budget still caps it


def test_a_slow_kernels_pilot_and_minimum_shrink_to_fit_the_budget() -> None:
    assert timing.pilot_rounds(None, 0.25) == timing.PILOT_ROUNDS  # nothing known yet: the full pilot
    assert timing.pilot_rounds(1e-3, 0.25) == timing.PILOT_ROUNDS  # a fast kernel: unchanged
    assert timing.pilot_rounds(0.05, 0.25) == 5  # the budget's worth of 50 ms rounds
    assert timing.pilot_rounds(0.15, 0.25) == timing.FEWEST_ROUNDS  # a 150 ms step: 3 rounds, not 10
    slow = [0.15] * 3
    assert timing.plan_rounds(slow, budget_s=0.25, min_rounds=3) == 3
    assert timing.plan_rounds(slow, budget_s=0.25) == timing.MIN_ROUNDS  # the old floor, for comparison


def test_launch_cover_sleeps_only_for_what_the_cpu_falls_behind() -> None:
    cover = timing.LaunchCover()
    cover.host_per_round_s, cover.gpu_per_round_s = 60e-6, 4e-3  # a long kernel: the CPU stays ahead
    assert cover.shortfall_s == 0.0 and cover.chunk == cover.MAX_CHUNK
    cover.host_per_round_s, cover.gpu_per_round_s = 500e-6, 40e-6  # a short one: 460 µs behind a round
    assert cover.shortfall_s == pytest.approx(460e-6)
    assert cover.chunk == int(cover.MAX_HOLD_S / 1.5 / 460e-6) < cover.MAX_CHUNK  # its sleep fits MAX_HOLD_S
    cover.host_per_round_s, cover.gpu_per_round_s = 50e-3, 0.0  # a very slow caller: one round a chunk
    assert cover.chunk == 1


@pytest.mark.gpu
def test_cuda_clock_measures_gpu_time_not_launch_time() -> None:
    clock = timing.CudaClock()
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 2e-3)  # ~2 ms of spinning
    start = clock()
    torch.cuda._sleep(cycles)
    elapsed = clock() - start
    assert 1e-3 < elapsed < 20e-3


@pytest.mark.gpu
def test_cpu_time_before_a_launch_is_not_timed() -> None:
    """A call that spends 300 µs on the CPU before a few-µs kernel is timed at the kernel's GPU time."""
    x = torch.zeros(1024, device="cuda")

    def slow_to_launch() -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < 300e-6:
            pass
        x.add_(1.0)

    m = timing.measure([slow_to_launch], budget_s=0.2)
    assert m.median_ms < 0.1, m.median_ms


@pytest.mark.gpu
def test_a_host_bound_call_keeps_to_the_window_s_wall_time() -> None:
    """2 ms of CPU before a tiny kernel is timed at the kernel's microseconds, so the budget alone
    plans MAX_ROUNDS of them (2 s of the GPU's hold): `max_wall_s` stops the window near its bound."""
    x = torch.zeros(1024, device="cuda")

    def host_bound() -> None:
        start = time.perf_counter()
        while time.perf_counter() - start < 2e-3:
            pass
        x.add_(1.0)

    start = time.perf_counter()
    m = timing.measure([host_bound], budget_s=0.25, max_wall_s=0.2)
    took = time.perf_counter() - start
    assert took < 0.6, took  # the warm-up (50 ms) and one chunk past the bound at most
    assert timing.FEWEST_ROUNDS <= len(m.samples_s) < 300, len(m.samples_s)


@pytest.mark.gpu
def test_measure_reports_median_and_spread() -> None:
    x = torch.randn(1 << 24, device="cuda")
    m = timing.measure([lambda: x * 2, lambda: x * 3], budget_s=0.3)
    assert len(m.samples_s) >= timing.MIN_ROUNDS
    assert 0 < m.median_ms < 10 and m.iqr_ms >= 0


@pytest.mark.gpu
def test_side_stream_work_is_caught_by_the_wall_clock() -> None:
    """Events on the default stream miss work left on a side stream; the device-wide sync does not."""
    side = torch.cuda.Stream()
    cycles = int(torch.cuda.get_device_properties(0).clock_rate * 1e3 * 5e-3)

    def cheat() -> None:
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)

    m = timing.measure([cheat], budget_s=0.05)
    wall = timing.loop_wall_time(cheat, 10)
    assert m.median_ms < 1.0 and wall / 10 > 4e-3


@pytest.mark.gpu
def test_grading_the_reference_against_itself_is_near_one(tmp_path: Path) -> None:
    from grader.cli import main

    assert main(["grade", str(ROOT / "reference"), "--out", str(tmp_path), "--problems", "gelu"]) == 0
    result = json.loads((tmp_path / "result.json").read_text())
    perf = result["problems"][0]["performance"]
    assert perf["status"] == "measured", perf
    assert 0.9 < perf["ratio_geomean"] < 1.1
    assert all(not s["flags"] for s in perf["shapes"])
