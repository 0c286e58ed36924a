"""A problem's first calls at its benchmark shapes, made before its timing takes the GPU alone.

Correctness runs small shapes; the first call at a benchmark shape compiles again wherever a
kernel is specialised on the shape (and a `torch.compile`d function traces again), and autotunes
at the new key. Made inside the exclusive window, that compiling held every other grading off
the GPU: on the H200 the bundled correct example's FlashAttention took 14.0 s alone on the GPU
with its kernels cold against 7.6 s warm (docs/gpu-runs/2026-12-03-session-16-class.md). Here
each shape's calls run once under the shared hold, stepping aside for timers like any correctness call; what
they autotune is forgotten in the worker (grader/engine/harness/autotune_reset.py), so the first timed
call tunes again alone on the GPU, on configurations compiled by then.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import torch

from grader.engine import protocol
from grader.engine.judge import performance
from grader.engine.orchestrator import budgets, trace
from grader.engine.problems.base import generator
from grader.engine.records.model import TestResult
from grader.engine.sandbox.process import WorkerDied, WorkerTimeout

if TYPE_CHECKING:
    from grader.engine.orchestrator.problem_run import ProblemRun


def warm(run: ProblemRun, tests: list[TestResult]) -> None:
    """The benchmark shapes' first calls, beside other gradings' (`make`), after the correctness cases."""
    if run.will_time(tests) and run.worker is not None and run.worker.ready:
        started = time.monotonic()
        run.unwarmed = make(run)
        run.checked_at = time.monotonic()  # the problem's own time, as correctness is
        run.phases.warm_s = run.checked_at - started


def make(run: ProblemRun) -> str | None:
    """Each benchmark shape's calls once, in `run`'s worker; why the problem cannot be timed, or None.

    Best effort: a call that raises stops the first calls and leaves the verdict to the timing,
    which makes the same call alone on the GPU. An out-of-memory error here may be another
    grading's doing, beside which these calls ran, or the worker's share of the card too small
    for the shape's budget: the timing makes the call alone (`budgets`). Only what timing could
    not undo is final: the problem's time limit spent, the worker dead (a crash at the benchmark
    shape) or told to leave.
    The worker keeps none of a shape's inputs once its calls are made (`Timer._forget`)."""
    name = run.problem.name
    try:
        for case in run.problem.benchmarks:
            seeds = performance.ShapeSeeds.draw(run.options.secret, name, case)
            request = protocol.WarmRequest(**performance.shape_request(case, seeds))
            with trace.span(name, case.name, "first calls, the GPU shared"), run.gpu_hold() as waiting:
                assert run.worker is not None  # ready when make() is called, and only a failure stops it
                try:
                    with run.clock.charging(f"first calls at {case.name}"):
                        reply, _ = run.worker.call(request, b"", run.deadline, 0, waiting)
                finally:
                    run.pause()  # a worker runs only while its grading holds the GPU
            if isinstance(reply, protocol.Unavailable) or (
                isinstance(reply, protocol.Failed) and reply.type == "OutOfMemoryError" and not reply.fatal
            ):
                budgets.first_call_short(run, case.name, reply)  # made again alone, in the timing
                continue  # the worker let go of the shape: the other shapes still compile here
            if isinstance(reply, protocol.Failed):
                run.note_failure(reply)
                if not reply.fatal:
                    return None  # the timing makes the call again, alone, and says what it raised
                run.close()
                return f"the first call at {case.name} ended its worker: {reply.message}"
            assert isinstance(reply, protocol.Warmed)  # the only other reply a warm request may get
            budgets.note_peak(run, case.name, reply.peak_bytes)
            trace.note(reply.call_s, name, case.name, "in the worker: one first call")
    except WorkerTimeout:
        run.close()
        run.contended = "time_limit"  # after every correctness case passed, beside other gradings
        return run.clock.ran_out("in the first calls at the benchmark shapes")
    except (WorkerDied, protocol.ProtocolError) as exc:
        run.close()
        return f"{exc} (in the first calls at the benchmark shapes)"
    prime_reference(run)
    return None


def prime_reference(run: ProblemRun) -> None:
    """The reference's first call in the grader's own process, at the problem's first benchmark
    shape, under the shared hold: Triton's launcher and the reference's kernels load here, not in
    the exclusive window, where the grading's first timed shape paid 0.6 s for it against 0.06 s
    for every later one (H200, session 19). Best effort: the window makes the same calls again."""
    case = run.problem.benchmarks[0]
    seeds = performance.ShapeSeeds.draw(run.options.secret, run.problem.name, case)
    with trace.span(run.problem.name, case.name, "the reference's first call, the GPU shared"), run.gpu_hold():
        try:
            run.kind.timed(run.reference, run.kind.make_inputs(case, generator(seeds.inputs, "cuda")))()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - out of memory beside others, say: the window has the GPU alone
            trace.note(0.0, run.problem.name, case.name, f"the reference's first call: {type(exc).__name__}")
        finally:
            torch.cuda.empty_cache()
