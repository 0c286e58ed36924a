"""The profile mode's records (`grader.engine.orchestrator.profiles`), from the worker's replies."""

from __future__ import annotations

from typing import Any

from grader.engine import protocol
from grader.engine.assignment.load import load_assignment
from grader.engine.orchestrator import profiles
from grader.engine.problems import REGISTRY


def test_each_benchmark_shape_gets_its_kernels_or_why_not() -> None:
    problem = load_assignment().problem("softmax")
    asked: list[protocol.ProfileRequest] = []

    def worker(request: protocol.ProfileRequest) -> tuple[Any, Any]:
        asked.append(request)
        if len(asked) == 2:
            raise RuntimeError("the worker died")
        kernels = [protocol.KernelTime(name="softmax_kernel", calls=1, time_s=2e-4)]
        return protocol.Profiled(kernels=kernels, wall_s=3e-4), None

    shapes = profiles.profile_shapes(problem, REGISTRY["softmax"], "secret", worker)
    assert [s.name for s in shapes] == [c.name for c in problem.benchmarks]
    assert shapes[0].kernels[0].name == "softmax_kernel" and shapes[0].kernels_ms == 0.2 and shapes[0].wall_ms == 0.3
    assert shapes[1].error == "not profiled: the worker died" and not shapes[1].kernels
    assert asked[0].case["name"] == problem.benchmarks[0].name and asked[0].seed != asked[1].seed
