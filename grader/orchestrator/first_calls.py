"""A problem's first calls at its benchmark shapes, made before its timing takes the GPU alone.

Correctness runs small shapes; the first call at a benchmark shape compiles again wherever a
kernel is specialised on the shape (and a `torch.compile`d function traces again), and autotunes
at the new key. Made inside the exclusive window, that compiling held every other grading off
the GPU: on the H200 the bundled correct example's FlashAttention took 14.0 s alone on the GPU
with its kernels cold against 7.6 s warm (docs/performance.md, session 16). Here each shape's
calls run once under the shared hold, stepping aside for timers like any correctness call; what
they autotune is forgotten in the worker (grader/harness/autotune_reset.py), so the first timed
call tunes again alone on the GPU, on configurations compiled by then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grader import protocol
from grader.judge import performance
from grader.orchestrator import trace
from grader.sandbox.process import WorkerDied, WorkerTimeout

if TYPE_CHECKING:
    from grader.orchestrator.problem_run import ProblemRun


def make(run: ProblemRun) -> str | None:
    """Each benchmark shape's calls once, in `run`'s worker; why they failed (its worker stopped
    where it cannot go on), or None. A failure here is the timing's: the problem is not timed."""
    name, limit = run.problem.name, run.limit
    try:
        for case in run.problem.benchmarks:
            seeds = performance.ShapeSeeds.draw(run.options.secret, name, case)
            request = protocol.WarmRequest(**performance.shape_request(case, seeds))
            with trace.span(name, case.name, "first calls, the GPU shared"), run.gpu_hold() as waiting:
                assert run.worker is not None  # ready when make() is called, and only a failure stops it
                try:
                    reply, _ = run.worker.call(request, b"", run.deadline, 0, waiting)
                finally:
                    run.pause()  # a worker runs only while its grading holds the GPU
            if isinstance(reply, protocol.Failed):
                if reply.fatal:
                    run.close()
                return f"the first call at {case.name} failed: {reply.message}"
            assert isinstance(reply, protocol.Warmed)  # the only other reply a warm request may get
            trace.note(reply.call_s, name, case.name, "in the worker: one first call")
    except WorkerTimeout:
        run.close()
        return f"the problem's time limit of {limit:g} s ran out in the first calls at the benchmark shapes"
    except (WorkerDied, protocol.ProtocolError) as exc:
        run.close()
        return f"{exc} (in the first calls at the benchmark shapes)"
    return None
