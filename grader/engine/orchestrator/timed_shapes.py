"""A problem's benchmark shapes timed against the reference, with the GPU held alone.

`measure` runs while grade's `_timing_lease` is held: each shape's alternating windows, the
wall-clock check, the PyTorch anchor. What needs the GPU but not alone (the sampled rounds'
checks, `round_checks.ShapeChecks`) is left on the run for `problem_result.finish`, which runs them
(`check_timed_rounds`) and scores the shapes once those checks have added their flags.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from grader.engine import protocol
from grader.engine.judge import performance, round_checks, windows
from grader.engine.orchestrator import budgets, profiles, shape_timing, trace, untimed
from grader.engine.records.model import Performance, ShapeTiming, TestResult
from grader.engine.sandbox.process import WorkerDied, WorkerTimeout

if TYPE_CHECKING:
    from grader.engine.orchestrator.problem_run import ProblemRun


class TimingFailed(Exception):
    """Why a problem's timing ended early: the record's reason, after "timing failed: "."""


def measure(run: ProblemRun, tests: list[TestResult]) -> None:
    """The performance half's timed part, with the GPU held alone (grade's `_timing_lease`)."""
    # waiting for other problems' timing is not part of this problem's duration (nor of its clock)
    run.waited = time.monotonic() - run.checked_at
    timing_started = time.monotonic()
    run.timed = time_shapes(run, tests)
    ok = run.options.profile and run.device == "cuda" and run.clean(tests)  # `--profile`: a report
    shapes = partial(call, run)
    run.profiled = profiles.profile_shapes(run.problem, run.kind, run.options.secret, shapes) if ok else []
    run.phases.timing_s = time.monotonic() - timing_started
    # its GPU memory free for the next problem's timing; its kernels copied after the window
    run.stop_worker(keep_kernels=True)
    run.measured_at = time.monotonic()


def time_shapes(run: ProblemRun, tests: list[TestResult]) -> Performance | list[ShapeTiming]:
    """Why the problem is not timed, or its shapes timed (still to be checked and scored)."""
    skipped = untimed.reason(run.problem, run.device, run.options, run.clean(tests), run.unwarmed)
    if skipped is not None:
        return skipped
    run.gpu_name = gpu = torch.cuda.get_device_name()
    name = run.problem.name
    try:
        side = performance.ReferenceSide(run.kind, run.problem, run.reference)
        shapes = []
        for case in run.problem.benchmarks:
            seeds = performance.ShapeSeeds.draw(run.options.secret, name, case)
            with trace.span(name, case.name, "timing, all of it"):
                shape, checks = shape_timing.measure_shape(partial(call, run), side, case, seeds, gpu, quiet=run.pause)
            peak = run.peaks.get(case.name)
            shape.peak_gib = round(peak / budgets.GIB, 3) if peak is not None else None
            shape.budget_gib = case.gpu_memory_gib
            shapes.append(shape)
            run.checks += [checks] if checks is not None else []
            if run.options.progress:
                run.options.progress(f"{name}: timed {case.name}")
            torch.cuda.empty_cache()
    except TimingFailed as failed:
        run.checks = []
        points = run.problem.points.performance
        if run.ungradable:  # the machine's fact: the points are pending, never zero
            return Performance(status="not_measured", reason=run.ungradable, score=None, max_score=points, gpu=gpu)
        return Performance(status="skipped", reason=f"timing failed: {failed}", score=0, max_score=points, gpu=gpu)
    return shapes


def call(
    run: ProblemRun, request: protocol.TimeRequest | protocol.LoopRequest | protocol.ProfileRequest
) -> tuple[protocol.Timed | protocol.Looped | protocol.Profiled, Any]:
    """One timing request to `run`'s worker; the reply and its sampled outputs (for
    `round_checks.verify_rounds`). Raises TimingFailed with the reason the record gives."""
    bound = run.deadline
    shape = str(request.case.get("name", ""))
    try:
        if run.worker is None or not run.worker.ready:
            run.start_worker()
            if run.fatal or run.worker is None:
                raise TimingFailed(run.fatal or "the worker did not start")
        with run.clock.charging(f"timing {shape}"):
            # the GPU is held alone: one request may not hold it for the problem's whole limit
            bound = time.monotonic() + windows.REQUEST_LIMIT_S
            bound = run.deadline if isinstance(request, protocol.ProfileRequest) else min(run.deadline, bound)
            reply, blob = run.worker.call(request, b"", bound, performance.MAX_TIMING_BLOB, run.clock.starved)
        payload = protocol.unpack_tensors(blob) if blob else {}
    except WorkerTimeout:
        run.stop_worker()
        if run.clock.left() > 0:
            raise TimingFailed(windows.request_limit_reason(request)) from None
        run.contended = "time_limit"  # every correctness case passed: its compiles may have been slowed by others'
        raise TimingFailed(run.clock.ran_out(f"while timing {shape}")) from None
    except (WorkerDied, protocol.ProtocolError) as exc:
        run.stop_worker()
        raise TimingFailed(str(exc)) from None
    if isinstance(reply, protocol.Unavailable):
        raise TimingFailed(budgets.unavailable(run, reply))
    if isinstance(reply, protocol.Failed):
        # out of memory here is under a budget the card gave, with the GPU held alone: the student's
        if reply.fatal:
            run.stop_worker()
        raise TimingFailed(reply.message)
    assert isinstance(reply, (protocol.Timed, protocol.Looped, protocol.Profiled))  # the other replies it may get
    if isinstance(reply, protocol.Timed):
        budgets.note_peak(run, shape, reply.peak_bytes)
    # what timed calls launch, and what the watched ones ran, are judged with the shape's other
    # flags (performance.launch_flags, performance.watched_flags): they withhold the performance
    return reply, payload


def check_timed_rounds(run: ProblemRun) -> None:
    """Each timed shape's sampled rounds checked beside other gradings' calls. Their workers'
    memory may leave too little for a shape's inputs: a check that runs out is made again with
    the GPU held alone, and one that runs out even then flags its shape (points withheld, the
    reason in the record), never the grading."""
    short: list[round_checks.ShapeChecks] = []
    with run.gpu_hold():
        for check in run.checks:
            try:
                shape_timing.check_rounds(check)
            except torch.cuda.OutOfMemoryError:
                short.append(check)
                torch.cuda.empty_cache()
    if not short:
        return
    with run.lease.exclusive() if run.lease is not None else nullcontext():
        for check in short:
            try:
                shape_timing.check_rounds(check)
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
                check.shape.flags.append(
                    f"{check.case.name}: the timed rounds could not be checked (out of GPU memory for the "
                    f"shape's inputs, even with the GPU held alone): no points without the check"
                )
