"""One call of a submission's function, made the same way by the grader's worker and by the
handout's tests: load the function, place fresh inputs, call it with NaN-filled allocations under
the watch, and describe what it returned for the trusted checks.

Both sides call `run`, so a case that passes `pytest handout` was called exactly as the grader
calls it. Nothing here judges anything: verdicts are the orchestrator's (`grader.engine.judge.checks`).
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import torch

from grader.engine import protocol
from grader.engine.harness import gpu_compile
from grader.engine.harness.device_activity import foreign_work
from grader.engine.harness.recording import CompiledAsEager, Recording, compiled_events
from grader.engine.harness.watch import GUARD, LAUNCH, PROFILER, LaunchCounter
from grader.engine.harness.writers import Writers
from grader.engine.problems.base import CallOutput, ProblemKind, output_facts
from grader.engine.spec import op_names
from grader.engine.spec.model import Case

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
# bound before any submission is imported (the tamper guard restores the modules' own names)
_time_ns = time.time_ns
_perf_counter = time.perf_counter
_cuda_sync = torch.cuda.synchronize
_record_function = torch.autograd.profiler.record_function
#: recorded by the harness itself at the end of every watched call: missing, recording was off
MARKER = "grader: end of the watched call"


def _settled(device: str) -> None:
    """Right after submission code: the guard restores first, then its GPU work is waited for."""
    GUARD.restore()
    if device == "cuda":
        _cuda_sync()


#: what a CUDA graph's replay records (the runtime's and the driver's entry points): the kernels a
#: graph runs were captured earlier, so no op of this call stands for them
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def _summed_up(
    record: dict[str, Any], names: list[str], kernels: list[str], launches_before: int, foreign: Sequence[str] = ()
) -> None:
    refused = Recording.stop()
    for switch in refused:
        GUARD.flag(f"the profiler ({switch} during the call)")
    distinct = set(names)
    record["aten_ops"] = sorted(n for n in distinct if op_names.recorded(n, Recording.namespaces))
    record["compiled_regions"] = compiled_events(distinct)
    record["gpu_kernels"] = kernels
    record["triton_launches"] = LaunchCounter.total() - launches_before
    record["graph_launches"] = sum(1 for n in names if n.startswith(GRAPH_LAUNCHES))
    record["foreign_work"] = list(foreign)


def _inside(events: list[Any], within: str) -> list[Any]:
    """The CPU events that start inside one of the ranges named `within`, on any thread (the
    profiler stamps every thread with one clock): a timed chunk's calls, not the harness's
    refills and flushes between them."""
    p = PROFILER
    # the CPU's ranges only: on a GPU the profiler also records each range's span of GPU time
    # under the same name, which runs on past the call, over the harness's work after it
    spans = sorted((p.start_ns(e), p.end_ns(e)) for e in events if p.name(e) == within)
    starts = [s for s, _ in spans]
    kept = []
    for e in events:
        start = p.start_ns(e)
        i = bisect.bisect_right(starts, start) - 1
        if i >= 0 and start <= spans[i][1] and p.name(e) != within:
            kept.append(e)
    return kept


#: what Triton's interpreter dispatches inside every launch on a CPU that the allow-list does not
#: name (it also allocates, copies and slices, which the list allows)
INTERPRETER_OWN = frozenset({"aten::set_"})


def judged(events: list[Any], within: str | None = None) -> list[str]:
    """The names of the CPU events the kernel rule judges: those inside a range named `within`
    (if given), but not the interpreter's own `set_` inside a Triton launch on the same thread.
    Nothing else inside a launch is exempt: a launch runs submission code too (a grid function,
    an autotuner's hook, an argument's `data_ptr`), and an op there is judged as anywhere else."""
    p = PROFILER
    cpu = [e for e in events if p.device_type(e) != p.cuda_device]
    launches: dict[int, list[tuple[int, int]]] = {}
    for e in cpu:
        if p.name(e) == LAUNCH:
            launches.setdefault(p.thread(e), []).append((p.start_ns(e), p.end_ns(e)))
    kept = []
    for e in cpu if within is None else _inside(cpu, within):
        start, name = p.start_ns(e), p.name(e)
        if name == LAUNCH:
            continue
        if name in INTERPRETER_OWN and any(s < start <= end for s, end in launches.get(p.thread(e), ())):
            continue
        kept.append(name)
    return kept


@contextmanager
def profiled(record: dict[str, Any], device: str, within: str | None = None) -> Iterator[None]:
    """Records the aten ops run on any thread, the GPU kernels, and the Triton launches.

    torch.compile'd functions run eagerly in here (`CompiledAsEager`), so their ops are seen too.
    With `within`, only the ops inside the ranges of that name count (`grader.engine.harness.timed_watch`).
    """
    start = LaunchCounter.total()
    p = PROFILER
    Recording.start()
    if not p.direct:  # pragma: no cover - fallback without tamper detection
        acts = [p.activities.CPU] + ([p.activities.CUDA] if device == "cuda" else [])
        with p.public(activities=acts) as prof:
            try:
                with CompiledAsEager():
                    yield
            finally:
                _settled(device)
        _summed_up(record, [e.name for e in prof.events()], [], start)
        return
    activities = {p.cpu} | ({p.cuda} if device == "cuda" else set())
    p.prepare(p.config, activities)
    p.enable(p.config, activities)
    enabled_at = _time_ns()
    try:
        with CompiledAsEager():
            yield
    finally:
        _settled(device)
        with _record_function(MARKER):
            pass
        try:
            result = p.disable()
        except RuntimeError:  # PyTorch <= 2.11: "Can't disable Kineto profiler when it's not running"
            result = None
        # a session the call ended leaves none to end here (start 0); one it started anew began late
        began = None if p.trace_start is None else (p.trace_start(result) if result is not None else 0)
        if began == 0:
            GUARD.flag("the profiler (switched off during the call)")
        elif began is not None and began > enabled_at:
            GUARD.flag("the profiler (restarted during the call)")
        events = p.events(result) if result is not None else []
        names = [p.name(e) for e in events]
        if result is not None and began != 0 and MARKER not in names:
            GUARD.flag("the profiler (op recording switched off during the call)")
        _summed_up(
            record,
            judged(events, within),
            sorted({p.name(e) for e in events if p.device_type(e) == p.cuda_device})[:50],
            start,
            foreign_work(events, Recording.namespaces, within) if device == "cuda" else [],
        )


def _storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage behind `t` as bytes: a view can hide writes beyond its own elements."""
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(t.untyped_storage())


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def input_bits(inputs: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A bit-exact copy of the storage of every input tensor (gaps of strided views included)."""
    return {k: _storage_bytes(v).clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}


def changed_inputs(inputs: dict[str, Any], before: dict[str, torch.Tensor]) -> list[str]:
    """Inputs whose storage differs from `before` in any byte, in size, or that were swapped out."""
    return [k for k, bits in before.items() if not torch.equal(_storage_bytes(inputs[k]), bits)]


def _key(t: torch.Tensor) -> tuple[Any, ...]:
    """A tensor's place: a view of it (`out.detach()`) has the same."""
    return (t.device.type, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)


#: a returned tensor's place as it returned -> (a copy of it then, the tensor itself)
Snapshots = dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor]]


def _snapshotting(
    fn: Callable[..., Any], device: str, taken: Snapshots, profile: dict[str, Any] | None = None
) -> Callable[..., Any]:
    """`fn`, and a copy of the tensor it returns taken as it returns, inside the watch.

    The values judged are the copy's: code that writes the output later (a thread, a hook, a
    backward, anything that runs after the watched part) changes nothing that is checked, and
    anything that writes it before the copy ran inside the watch. With `profile` (a watched
    call), the writer check's finding on what `fn` returned is put there (`grader.engine.harness.writers`).
    """

    def call(*args: Any, **kwargs: Any) -> Any:
        if profile is None:
            result = fn(*args, **kwargs)
        else:
            watch = Writers(LaunchCounter._inside, LaunchCounter.total)
            watch.start(args, kwargs)
            try:
                result = fn(*args, **kwargs)
            finally:
                if not watch.stop():
                    GUARD.flag("the grader's writer check (its dispatch mode taken off PyTorch's stack)")
            profile["unwritten"] = watch.judge(result)
        if type(result) is torch.Tensor and result.layout == torch.strided:
            if device == "cuda":
                _cuda_sync()
            taken[_key(result)] = (result.detach().clone(), result)
        return result

    return call


def describe_outputs(
    result: CallOutput,
    inputs: dict[str, Any],
    snapshots: Snapshots | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per output: the facts a copy would erase (exact type, layout, device, aliasing), and the copy.

    Only an exact `torch.Tensor` is looked at further: a subclass's methods are the student's code
    (`__torch_function__` would run, and could lie about its storage or device). The copy sent
    back is a plain, contiguous CPU tensor of a floating dtype, dense layout, or nothing; its
    values are those the function returned, as `run` copied them inside the watch (`snapshots`).
    """
    spans = {k: _storage_span(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    meta: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    snapshots = snapshots or {}
    notes = dict(result.notes)
    # a returned tensor given other storage since it returned: what it holds now was made later
    moved = {_key(tensor) for key, (_, tensor) in snapshots.items() if _key(tensor) != key}
    for name, value in result.outputs.items():
        info = output_facts(value)
        payload[name] = None
        if info["exact"]:
            if value.layout == torch.strided and value.device.type in ("cpu", "cuda"):
                start, end = _storage_span(value)
                info["stride"] = list(value.stride())
                info["aliases"] = [k for k, (s, e) in spans.items() if start < e and s < end]
                if _key(value) in moved:
                    notes.setdefault(name, "the returned tensor was given other storage after the function returned")
                if value.dtype in FLOAT_DTYPES:
                    taken = snapshots.get(_key(value))
                    source = taken[0] if taken is not None else value
                    payload[name] = source.detach().resolve_conj().resolve_neg().to("cpu").contiguous().clone()
        meta[name] = info
    meta["_notes"] = notes
    return meta, payload


class FreshInputs:
    """Places the repeats of one case in the same tensors, with new values.

    The second call of a case gets the very tensor objects of the first (same id, same address,
    same shape and strides) holding different values: an output cache keyed by shape, pointer or
    id hits and returns the first call's output, which is wrong for the second call's inputs, so
    it fails every time instead of when the allocator happens to reuse an address.
    """

    def __init__(self) -> None:
        self.case: str | None = None
        self.tensors: dict[str, torch.Tensor] = {}

    @staticmethod
    def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
        return (a.dtype, a.device, a.shape, a.stride(), a.storage_offset(), a.untyped_storage().nbytes()) == (
            b.dtype,
            b.device,
            b.shape,
            b.stride(),
            b.storage_offset(),
            b.untyped_storage().nbytes(),
        )

    def place(self, case: str, inputs: dict[str, Any]) -> dict[str, Any]:
        new = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        old = self.tensors
        if case == self.case and old.keys() == new.keys() and all(self._same_layout(old[k], new[k]) for k in new):
            for k in new:
                _storage_bytes(old[k]).copy_(_storage_bytes(new[k]))
            return {**inputs, **old}
        self.case, self.tensors = case, new
        return inputs


def nan_fill(on: bool) -> None:
    """Fill uninitialised memory with NaN (correctness calls: an output element the kernel never
    wrote shows), or not (timing: it would add a write to every empty())."""
    torch.use_deterministic_algorithms(on, warn_only=on)
    torch.utils.deterministic.fill_uninitialized_memory = on  # type: ignore[attr-defined]


@dataclass
class Outcome:
    """One call made by `run`: what its checks are judged on."""

    #: the inputs as the function got them (a repeat's are the first call's tensors)
    inputs: dict[str, Any]
    #: their storage's bytes before the call
    before: dict[str, torch.Tensor]
    result: CallOutput | None
    #: what the call raised, the submission's own error (None: it returned)
    error: BaseException | None
    #: what the profiler saw (empty when the call was not watched)
    profile: dict[str, Any]
    triton_launches: int
    seconds: float
    #: copies of what the function returned, taken inside the watch (`describe_outputs`)
    snapshots: Snapshots = field(default_factory=dict)
    #: the kernel variants it launched, compiled for the graded GPU (under the interpreter only)
    gpu_compiles: list[protocol.GpuCompile] = field(default_factory=list)

    def changed_inputs(self) -> list[str]:
        return changed_inputs(self.inputs, self.before)


def run(
    kind: ProblemKind,
    fn: Callable[..., Any],
    case: Case,
    inputs: dict[str, Any],
    device: str,
    fresh: FreshInputs,
    watch: bool,
) -> Outcome:
    """Call `fn` once on `inputs` (already on `device`), profiled when `watch`; never raises for
    what the submission does. Tampering is restored at once and left in `GUARD` for the caller."""
    inputs = fresh.place(case.name, inputs)
    before = input_bits(inputs)
    profile: dict[str, Any] = {}
    watcher = (lambda: profiled(profile, device)) if watch else nullcontext
    launches = LaunchCounter.total()
    result: CallOutput | None = None
    error: BaseException | None = None
    started = _perf_counter()
    taken: Snapshots = {}
    gpu_compile.start(case.compile_only)
    nan_fill(True)
    try:
        try:
            result = kind.call(_snapshotting(fn, device, taken, profile if watch else None), inputs, case, watcher)
            if device == "cuda":
                _cuda_sync()
        finally:
            GUARD.restore()  # before any other name is looked up
    except BaseException as exc:  # noqa: BLE001 - the student's error is a result to report
        error = exc
    compiles = gpu_compile.taken()
    gpu_compile.start()  # compile-only ends with the call
    nan_fill(False)
    spent = _perf_counter() - started
    launched = LaunchCounter.total() - launches
    return Outcome(inputs, before, result, error, profile, launched, spent, taken, compiles)


def watched(
    kind: ProblemKind, fn: Callable[..., Any], inputs: dict[str, Any], case: Case, device: str
) -> tuple[CallOutput, dict[str, Any], int]:
    """One call under exactly the watch correctness uses (`ProblemKind.call`), as a timed shape is
    watched: its result, what the profiler saw, and its Triton launches. Raises what `fn` raises."""
    profile: dict[str, Any] = {}
    launches = LaunchCounter.total()
    result = kind.call(fn, inputs, case, lambda: profiled(profile, device))
    return result, profile, LaunchCounter.total() - launches
