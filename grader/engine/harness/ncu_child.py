"""The child `ncu` starts (`grader.engine.harness.ncu_summary`): the submission imported as the worker
imports it, the shape warmed up with the profiler off, then one call between cudaProfilerStart
and Stop. A fresh interpreter of its own, so it imports what it needs at the top."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from grader.engine import protocol, timing
from grader.engine.harness import imports, student_runtime
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import generator
from grader.engine.spec import versions


def main(argv: list[str]) -> int:
    """argv: submission folder, problem, module, function, the ProfileRequest as JSON."""
    submission, problem, module, function, raw = argv
    request = protocol.ProfileRequest.model_validate(json.loads(raw))
    kind = REGISTRY[problem]
    student_runtime.prepare()
    imports.install(Path(submission), versions.graded().allowed_imports)
    fn = load_function(Path(submission), module, function)
    case = kind.case_model.model_validate(request.case)
    inputs = kind.make_inputs(case, generator(request.seed, "cuda"))
    calls = [kind.timed(fn, inputs)]
    timing.warm_up(calls)
    cudart = torch.cuda.cudart()
    cudart.cudaProfilerStart()
    calls[0]()
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
