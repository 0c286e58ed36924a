"""`grader reference-cache build`: the staff reference compiled and tuned on this GPU, into its cache.

Apart from grader/engine/judge/reference_cache.py (where the cache is, and how a grading reads it), which
the timing path imports: building runs the timing path's own reference calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.engine.judge.reference_cache import ENV, activate


def build(spec: Path, problems: list[str] | None = None, log: Any = print) -> Path:
    """Compile and autotune the reference for every benchmark shape of the spec, on this GPU.

    Each call is the one the grading times (performance.ReferenceSide), so the kernels and the
    autotune keys are the grading's own.
    """
    import time

    import torch

    from grader.engine.assignment.load import load_assignment
    from grader.engine.judge import performance
    from grader.engine.problems import REGISTRY

    if not torch.cuda.is_available():
        raise RuntimeError("grader reference-cache build needs a CUDA GPU (the reference is only timed on one)")
    assignment = load_assignment(spec)
    folder = activate(assignment.assignment.version)
    if folder is None:
        raise RuntimeError(f"the reference cache is switched off (${ENV}=off)")
    for problem in assignment.problems:
        if (problems and problem.name not in problems) or not problem.benchmarks:
            continue
        started = time.monotonic()
        side = performance.ReferenceSide(REGISTRY[problem.name], problem, performance.load_reference(problem))
        for case in problem.benchmarks:
            reference_calls, _, _ = side.calls(case, 0)
            for call in reference_calls:
                call()
            torch.cuda.synchronize()
        log(
            f"{problem.name}: {len(problem.benchmarks)} benchmark shape(s) compiled and tuned in "
            f"{time.monotonic() - started:.1f} s"
        )
    return folder
