"""The `profile` mode's report: one warm call of each benchmark shape under the profiler, in the
worker (`grader.harness.kernel_profile`), turned into records. Judged by nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader import protocol
from grader.judge import performance
from grader.orchestrator import trace
from grader.problems.base import ProblemKind
from grader.records.model import KernelTime, ShapeProfile
from grader.spec.model import Problem


def profile_shapes(
    problem: Problem,
    kind: ProblemKind,
    secret: str,
    worker_call: Callable[[protocol.ProfileRequest], tuple[Any, Any]],
) -> list[ShapeProfile]:
    """Each benchmark shape's profile; a shape the worker could not profile says why (a report
    never fails a grading)."""
    shapes = []
    for case in problem.benchmarks:
        seeds = performance.ShapeSeeds.draw(secret, problem.name, case)
        request = protocol.ProfileRequest(case=case.model_dump(), seed=seeds.inputs, sets=performance.INPUT_SETS)
        described = kind.describe(case)
        try:
            with trace.span(problem.name, case.name, "profiled call"):
                reply, _ = worker_call(request)
        except Exception as failed:  # noqa: BLE001 - the timing call's failure, whatever its kind
            shapes.append(ShapeProfile(name=case.name, case=described, error=f"not profiled: {failed}"))
            continue
        assert isinstance(reply, protocol.Profiled)  # what a profile request gets back
        kernels = [KernelTime(name=k.name, calls=k.calls, time_ms=round(k.time_s * 1e3, 4)) for k in reply.kernels]
        shapes.append(
            ShapeProfile(
                name=case.name,
                case=described,
                wall_ms=round(reply.wall_s * 1e3, 4),
                kernels_ms=round(sum(k.time_ms for k in kernels), 4),
                kernels=kernels,
            )
        )
    return shapes
