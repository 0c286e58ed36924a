"""Where one call's GPU time goes, kernel by kernel: the `profile` mode of `grader serve` and
`grader grade --profile`.

The worker warms the shape up as timing does, then runs one call with the profiler's CUDA
activity on and sums the GPU kernels it ran by name: what a student would read in the PyTorch
profiler's table, without having a GPU. Nothing here is judged; it is a report for the student.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import torch

from grader.engine import protocol, timing
from grader.engine.harness.watch import PROFILER

#: kernels listed per profile (the rest are summed into the last line)
MAX_KERNELS = 12
NAME_CHARS = 160


def summarize(kernels: Iterable[tuple[str, float]], limit: int = MAX_KERNELS) -> list[protocol.KernelTime]:
    """(name, seconds) per kernel launch -> one line per name, the longest first; past `limit`,
    the rest summed as one line."""
    by_name: dict[str, list[float]] = {}
    for name, seconds in kernels:
        by_name.setdefault(name[:NAME_CHARS], []).append(seconds)
    lines = sorted(
        (protocol.KernelTime(name=n, calls=len(t), time_s=sum(t)) for n, t in by_name.items()),
        key=lambda k: -k.time_s,
    )
    if len(lines) > limit:
        rest = lines[limit - 1 :]
        others = protocol.KernelTime(
            name=f"({len(rest)} other kernels)", calls=sum(k.calls for k in rest), time_s=sum(k.time_s for k in rest)
        )
        lines = [*lines[: limit - 1], others]
    return lines


def profile_call(calls: list[Callable[[], Any]]) -> protocol.Profiled:
    """Warm up as timing does, then one call of the first input set under the profiler."""
    p = PROFILER
    timing.warm_up(calls)  # ends synchronised
    activities = {p.cpu, p.cuda}
    p.prepare(p.config, activities)
    p.enable(p.config, activities)
    started = time.perf_counter()
    try:
        calls[0]()
        torch.cuda.synchronize()
    finally:
        wall = time.perf_counter() - started
        result = p.disable()
    events = p.events(result) if result is not None else []
    kernels = ((p.name(e), p.duration_ns(e) / 1e9) for e in events if p.device_type(e) == p.cuda_device)
    return protocol.Profiled(kernels=summarize(kernels), wall_s=wall)
