"""The GPU work of a watched call, by where it was launched from: every kernel, copy and fill the
device ran must have been launched inside one of the submission's Triton launches or inside a
PyTorch op (whose name the kernel rule judges). A kernel launched from anywhere else (a CUDA
extension's function called directly, a library reached through ctypes, cupy) is work that no op
and no Triton launch stands for.

The profiler pairs each device event with the CPU event that launched it (the runtime call,
`cuLaunchKernelEx`, `cudaMemcpyAsync`, ...) by a correlation id; the launch is placed by the
ranges around that CPU event on its thread. A range of the submission's (`record_function`) shows
on the device as an annotation paired with itself, and is not work.
"""

from __future__ import annotations

from typing import Any

from grader.engine.harness.watch import LAUNCH, PROFILER
from grader.engine.spec import op_names

#: CPU events that launch device work: a device event paired with one of these is work even when
#: the kernel carries the same name
_LAUNCHERS = ("cuLaunch", "cudaLaunch", "cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset", "cudaGraphLaunch")


def _is_op(name: str, namespaces: set[str]) -> bool:
    return name == LAUNCH or ("::" in name and op_names.recorded(name, namespaces))


def foreign_work(events: list[Any], namespaces: set[str], within: str | None = None) -> list[str]:
    """The names of the device events launched outside every Triton launch and every PyTorch op
    (only those launched inside a range named `within`, if given)."""
    p = PROFILER
    if not p.direct or p.correlation is None:  # pragma: no cover - a PyTorch without the pairing
        return []
    cpu = [e for e in events if p.device_type(e) != p.cuda_device]
    device = [e for e in events if p.device_type(e) == p.cuda_device]
    if not device:
        return []
    by_pair: dict[int, Any] = {}
    ranges: dict[int, list[tuple[int, int, str]]] = {}
    for e in cpu:
        by_pair.setdefault(p.correlation(e), e)
        ranges.setdefault(p.thread(e), []).append((p.start_ns(e), p.end_ns(e), p.name(e)))
    found: list[str] = []
    for e in device:
        name = p.name(e)
        launch = by_pair.get(p.correlation(e))
        if launch is None:
            continue  # launched before the watch began, or from outside this process's view
        launcher = p.name(launch)
        if launcher == name and not launcher.startswith(_LAUNCHERS):
            continue  # a range's annotation
        at, around = p.start_ns(launch), ranges.get(p.thread(launch), [])
        enclosing = [n for s, end, n in around if s <= at <= end and n != launcher]
        if within is not None and within not in enclosing:
            continue
        if not any(_is_op(n, namespaces) for n in enclosing) and name not in found:
            found.append(name)
    return found[:10]
