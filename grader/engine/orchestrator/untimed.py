"""Why a problem's performance half times nothing: the record's reason, before any worker is asked."""

from __future__ import annotations

import torch

from grader.engine.orchestrator.options import GradeOptions
from grader.engine.records.model import Performance
from grader.engine.spec.model import Problem


def reason(
    problem: Problem, device: str, options: GradeOptions, clean: bool, unwarmed: str | None = None
) -> Performance | None:
    """The performance record of a problem that is not timed here, or None when it is; `unwarmed`:
    why its first calls at the benchmark shapes failed (grader/engine/orchestrator/first_calls.py)."""
    points = problem.points.performance
    if device != "cuda":
        return Performance(
            status="not_measured", reason="no GPU: performance is measured only on a CUDA GPU", max_score=points
        )
    if not options.time_performance:
        return Performance(status="not_measured", reason="timing was switched off for this run", max_score=points)
    if not clean:
        return Performance(
            status="skipped", reason="timed only once every correctness test passes", score=0.0, max_score=points
        )
    if not problem.benchmarks:
        return Performance(status="not_measured", reason="the spec lists no benchmark shapes", max_score=points)
    if not (options.reference_dir / f"{problem.module}.py").is_file():
        text = (
            "the staff reference is not available here (a student copy): time your kernels with pytest "
            "handout --benchmark-only"
        )
        return Performance(status="not_measured", reason=text, max_score=points, gpu=torch.cuda.get_device_name())
    if unwarmed is not None:
        text = f"timing failed: {unwarmed}"
        return Performance(status="skipped", reason=text, score=0.0, max_score=points, gpu=torch.cuda.get_device_name())
    return None
