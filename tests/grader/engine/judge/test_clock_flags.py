"""The judge of a shape's clocks, a pure function: what makes a timing untrustworthy, from numbers alone."""

from __future__ import annotations

from grader.engine.judge.performance import clock_flags

MS = 1e-3


def test_an_honest_shape_is_not_flagged() -> None:
    # 1 ms a call, a 100-call loop the worker and the orchestrator both saw take about 0.1 s
    assert clock_flags(1 * MS, 0.2 * MS, 100, 0.100, 0.104) == []


def test_a_time_under_the_roofline_floor_is_flagged() -> None:
    (flag,) = clock_flags(0.05 * MS, 0.2 * MS, 100, 0.005, 0.006)
    assert "below the roofline floor" in flag


def test_a_worker_claiming_more_than_the_wall_clock_saw_is_flagged() -> None:
    (flag,) = clock_flags(1 * MS, 0.2 * MS, 100, 0.5, 0.104)
    assert "reported 0.5000 s" in flag


def test_events_far_below_the_wall_clock_are_flagged_as_a_side_stream() -> None:
    # the events say 1 ms a call, the orchestrator saw 10 ms a call: something ran off the clock
    (flag,) = clock_flags(1 * MS, 0.2 * MS, 100, 0.100, 1.0)
    assert "side stream or patched timer" in flag


def test_launch_overhead_of_tiny_kernels_is_allowed_for() -> None:
    # 20 µs kernels: the pipe and Python per call dominate the wall clock; no flag under 50 µs
    assert clock_flags(0.02 * MS, 0.001 * MS, 200, 0.004, 0.5) == []


def test_every_timed_round_launches_a_triton_kernel() -> None:
    """Timed calls are held to the kernel rule: a window with fewer launches than rounds is flagged
    (PyTorch, or a CUDA graph's replay, after correctness passed on the submission's kernel)."""
    from grader.engine.judge.performance import launch_flags

    assert launch_flags([(40, 30), (12, 12)]) == []  # honest: warm-up calls launch too
    flags = launch_flags([(40, 30), (3, 12)])
    assert len(flags) == 1 and "timed window 2: 3 Triton kernel launch(es) for 12 timed rounds" in flags[0]
    assert launch_flags([(0, 10)])
    (loop,) = launch_flags([(0, 200)], label="the wall-clock check's loop")  # the same rule for its loop
    assert loop.startswith("the wall-clock check's loop: 0 Triton kernel launch(es) for 200 timed rounds")
