"""The `profile` mode's report: one warm call of each benchmark shape under the profiler, in the
worker (`grader.engine.harness.kernel_profile`), turned into records. Judged by nothing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.engine import protocol
from grader.engine.judge import performance
from grader.engine.orchestrator import trace
from grader.engine.problems.base import ProblemKind
from grader.engine.records.model import KernelCounters, KernelTime, ShapeProfile
from grader.engine.spec.model import Problem

NCU_ENV = "GRADER_NCU"  # the Nsight Compute program to use, or "off"


def ncu_program() -> str | None:
    """Nsight Compute's `ncu` by absolute path ($GRADER_NCU, the PATH, CUDA's usual place), or None."""
    configured = os.environ.get(NCU_ENV, "")
    if configured.lower() in ("off", "0", "none"):
        return None
    for candidate in (configured, shutil.which("ncu") or "", "/usr/local/cuda/bin/ncu"):
        if candidate and os.access(candidate, os.X_OK) and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    return None


def profile_shapes(
    problem: Problem,
    kind: ProblemKind,
    secret: str,
    worker_call: Callable[[protocol.ProfileRequest], tuple[Any, Any]],
) -> list[ShapeProfile]:
    """Each benchmark shape's profile; a shape the worker could not profile says why (a report
    never fails a grading)."""
    shapes = []
    ncu = ncu_program()
    for case in problem.benchmarks:
        seeds = performance.ShapeSeeds.draw(secret, problem.name, case)
        request = protocol.ProfileRequest(
            case=case.model_dump(), seed=seeds.inputs, sets=performance.INPUT_SETS, ncu=ncu
        )
        described = kind.describe(case)
        try:
            with trace.span(problem.name, case.name, "profiled call"):
                reply, _ = worker_call(request)
        except Exception as failed:  # noqa: BLE001 - the timing call's failure, whatever its kind
            shapes.append(ShapeProfile(name=case.name, case=described, error=f"not profiled: {failed}"))
            continue
        assert isinstance(reply, protocol.Profiled)  # what a profile request gets back
        kernels = [KernelTime(name=k.name, calls=k.calls, time_ms=round(k.time_s * 1e3, 4)) for k in reply.kernels]
        counters = [
            KernelCounters(**k.model_dump(exclude={"time_s"}), time_ms=round(k.time_s * 1e3, 4)) for k in reply.counters
        ]
        note = reply.counters_note or ("" if ncu else "Nsight Compute (ncu) is not installed on the grading machine")
        shapes.append(
            ShapeProfile(
                name=case.name,
                case=described,
                wall_ms=round(reply.wall_s * 1e3, 4),
                kernels_ms=round(sum(k.time_ms for k in kernels), 4),
                kernels=kernels,
                counters=counters,
                counters_note=note,
            )
        )
    return shapes
