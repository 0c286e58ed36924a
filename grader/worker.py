"""The untrusted side of grading: imports one submission module and runs the calls it is sent.

This process is started by `grader.sandbox` (spawned, never forked from the orchestrator), with
no secret in its environment, under resource limits and, when the grader runs as root, as a
transient unprivileged user in a mount namespace that hides the reference, the hidden cases and
the results. Everything it sends back is data for the orchestrator to check.

The submission runs in this very process, so every note it sends (exact output types, aliasing,
profiled ops, launch counts) could in principle be forged by code that reaches into this module.
What is done here makes that take deliberate effort, and makes the easy routes fail loudly:

- the grader's modules are removed from `sys.modules` before the submission is imported, and
  nothing in `__main__` refers to them: `import grader.worker` fails, and a fresh copy imported
  through a hand-made path is not the copy that is running;
- ops are recorded with the C-level profiler functions, bound when this module was imported, on
  every thread; a call that switched the profiler off or restarted it is reported as tampering;
- the functions the harness and the timing depend on (builtins, time, torch.Tensor, CUDA events,
  torch.allclose, the profiler, Triton's launch entry point, ...) are snapshotted before the
  import; any replacement is restored at once and the problem fails with the names replaced;
- the Triton launch counter lives in a closure whose globals hold nothing of the grader.

What remains (walking frames or the garbage collector to reach this module's globals, poking
memory through ctypes, forging replies on the pipe) is listed in docs/defenses.md: the output
values for fresh inputs still have to be computed, so the cheat left is "used PyTorch or a
token kernel and hid it", which the static scan reports for a human to look at.
"""

from __future__ import annotations

import argparse
import builtins
import importlib.util
import io
import json
import os
import pickle
import resource
import sys
import time
import traceback
import types
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

# the profiler's own log (Kineto) reports "gpuGetDeviceCount failed" on a CUDA build without a GPU:
# noise in a student's output; read when the profiler first starts, so setting it here is enough
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

import torch  # noqa: E402
import torch.autograd.profiler  # noqa: E402
import torch.profiler
import torch.testing

from grader import imports, kernel_cache, protocol, student_runtime, timed_rounds, timing, versions
from grader.problems import REGISTRY
from grader.problems.base import CallOutput, generator, output_facts

MAX_MESSAGE = 4000
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
_time_ns = time.time_ns
_perf_counter = time.perf_counter
_cuda_sync = torch.cuda.synchronize
_MISSING = object()


# -- launch counting ----------------------------------------------------------------------------

_WRAPPER = '''
def make(original, counter):
    def run(self, *args, **kwargs):
        if not kwargs.get("warmup", False):
            counter[0] += 1
        return original(self, *args, **kwargs)
    return run
'''


class LaunchCounter:
    """Counts Triton kernel launches by wrapping `run` of Triton's JIT and interpreter functions.

    The wrapper is compiled in a namespace of its own: `JITFunction.run.__globals__` leads
    nowhere near the grader.
    """

    _counter = [0]

    @classmethod
    def total(cls) -> int:
        return cls._counter[0]

    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:  # wrapping twice would count every launch twice
            return
        cls._installed = True
        import triton.runtime.jit as jit

        targets: list[Any] = [jit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - older triton
            pass
        namespace: dict[str, Any] = {"__builtins__": {}}
        exec(_WRAPPER, namespace)  # noqa: S102 - a fixed string, compiled apart from this module's globals
        for klass in targets:
            klass.run = namespace["make"](klass.run, cls._counter)


# -- tamper guard -------------------------------------------------------------------------------

_ALL = None
_CACHED_BY_PYTHON = frozenset({"__slotnames__"})  # copyreg caches it on a class the first time one is pickled
_TIME = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time", "sleep")
_PROFILER_NAMES = ("_enable_profiler", "_disable_profiler", "_prepare_profiler", "_profiler_enabled", "_toggle_collection_dynamic", "_enable_profiler_legacy", "_disable_profiler_legacy")


def _guarded() -> list[tuple[str, Any, tuple[str, ...] | None]]:
    """(label, owner, names or _ALL): what the harness, the checks and the timing rely on."""
    import triton.runtime.jit as jit

    owners: list[tuple[str, Any, tuple[str, ...] | None]] = [
        ("time", time, _TIME),
        ("os", os, ("read", "write")),
        ("json", json, ("dumps", "loads")),
        ("io", io, ("BytesIO",)),
        ("pickle", pickle, ("Pickler", "Unpickler", "dump", "dumps", "load", "loads")),
        ("torch", torch, ("allclose", "isclose", "equal", "empty", "empty_like", "zeros", "save", "load", "isnan", "isinf", "Tensor", "use_deterministic_algorithms")),
        ("torch.Tensor", torch.Tensor, _ALL),
        ("torch.cuda", torch.cuda, ("Event", "Stream", "synchronize", "_sleep", "current_stream", "stream", "set_stream", "empty_cache", "get_device_properties", "current_device")),
        ("torch.cuda.Event", torch.cuda.Event, _ALL),
        ("torch.testing", torch.testing, ("assert_close",)),
        ("torch.autograd", torch.autograd, _PROFILER_NAMES),
        ("torch._C._autograd", torch._C._autograd, _PROFILER_NAMES),
        ("torch.autograd.profiler", torch.autograd.profiler, ("profile", "record_function") + _PROFILER_NAMES),
        ("torch.autograd.profiler.profile", torch.autograd.profiler.profile, _ALL),
        ("torch.profiler", torch.profiler, ("profile", "ProfilerActivity", "record_function")),
        ("torch.profiler.profile", torch.profiler.profile, _ALL),
        ("triton JITFunction", jit.JITFunction, ("run",)),
    ]
    try:
        from triton.runtime.interpreter import InterpretedFunction

        owners.append(("triton InterpretedFunction", InterpretedFunction, ("run",)))
    except ImportError:  # pragma: no cover
        pass
    return owners


class Guard:
    """Snapshots functions before the submission is imported; restores and names any it replaced.

    `restore` is the first thing that runs after submission code: builtins are put back with dict
    methods alone (a builtin type's methods cannot be replaced), and only then is any other name
    looked up. Data attributes are not watched (PyTorch changes its own flags); names added to a
    module are not either (lazy imports add them), but a name added to a class watched whole
    (torch.Tensor, CUDA events, the profiler) is removed and reported: it would shadow a method
    of the class's C base.
    """

    def __init__(self) -> None:
        self.builtins = builtins.__dict__
        self.saved_builtins: dict[str, Any] = {}
        self.saved: list[tuple[str, Any, str, Any]] = []
        #: classes watched whole: a name added to them shadows a method of their C base class
        self.closed: list[tuple[str, type, frozenset[str]]] = []
        self.tampered: list[str] = []

    def snapshot(self) -> None:
        self.saved_builtins = dict(self.builtins)
        self.saved, self.closed = [], []
        for label, owner, names in _guarded():
            entries = vars(owner)
            if names is _ALL and isinstance(owner, type):
                self.closed.append((label, owner, frozenset(entries)))
            for name in names if names is not _ALL else list(entries):
                value = entries.get(name, _MISSING)
                if value is _MISSING or not (callable(value) or isinstance(value, (type, types.ModuleType, staticmethod, classmethod, property))):
                    continue
                self.saved.append((label, owner, name, value))

    def restore(self) -> list[str]:
        """Put back whatever was replaced; return (and remember) what it was."""
        saved, current = self.saved_builtins, self.builtins
        changed = [f"builtins.{k}" for k in saved if current.get(k, _MISSING) is not saved[k]]
        if changed:
            current.update(saved)
        for label, owner, name, value in self.saved:
            if vars(owner).get(name, _MISSING) is not value:
                changed.append(f"{label}.{name}")
                setattr(owner, name, value)
        for label, klass, names in self.closed:
            for name in [n for n in vars(klass) if n not in names and n not in _CACHED_BY_PYTHON]:
                changed.append(f"{label}.{name}")
                delattr(klass, name)
        for name in changed:
            self.flag(name)
        return changed

    def flag(self, what: str) -> None:
        if what not in self.tampered:
            self.tampered.append(what)

    def report(self) -> dict[str, Any] | None:
        """The error every later reply carries once the submission has tampered with the harness."""
        if not self.tampered:
            return None
        shown = ", ".join(self.tampered[:8]) + (f" and {len(self.tampered) - 8} more" if len(self.tampered) > 8 else "")
        return {
            "status": "error",
            "type": "Tampering",
            "message": f"the submission tampered with the grader's environment: {shown}. Replacing Python, PyTorch or Triton "
            "functions, or switching the profiler, is not allowed in a submission; the problem scores 0",
            "traceback": "",
            "fatal": False,
        }


GUARD = Guard()


# -- op recording -------------------------------------------------------------------------------


class _Profiler:
    """The C-level profiler entry points, bound at import so a submission cannot swap them."""

    def __init__(self) -> None:
        self.direct = False
        try:
            from torch._C._autograd import _KinetoEvent, _ProfilerResult
            from torch._C._profiler import _ExperimentalConfig
            from torch.autograd import DeviceType, ProfilerActivity, ProfilerConfig, ProfilerState, _disable_profiler, _enable_profiler, _prepare_profiler

            try:
                experimental = _ExperimentalConfig(profile_all_threads=True)
                self.all_threads = True
            except TypeError:  # older PyTorch: ops on other threads are not seen (docs/defenses.md)
                experimental = _ExperimentalConfig()
                self.all_threads = False
            self.config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, experimental)
            self.cpu, self.cuda, self.cuda_device = ProfilerActivity.CPU, ProfilerActivity.CUDA, DeviceType.CUDA
            self.prepare, self.enable, self.disable = _prepare_profiler, _enable_profiler, _disable_profiler
            self.events, self.trace_start = _ProfilerResult.events, getattr(_ProfilerResult, "trace_start_ns", None)
            self.name, self.device_type = _KinetoEvent.name, _KinetoEvent.device_type
            self.direct = True
        except (ImportError, AttributeError, TypeError):  # pragma: no cover - a PyTorch without them
            self.public = torch.profiler.profile
            self.activities = torch.profiler.ProfilerActivity


PROFILER = _Profiler()


@contextmanager
def _profiled(record: dict[str, Any], device: str) -> Iterator[None]:
    """Records the aten ops run on any thread, the GPU kernels, and the Triton launches."""
    start = LaunchCounter.total()
    p = PROFILER
    if not p.direct:  # pragma: no cover - fallback without tamper detection
        acts = [p.activities.CPU] + ([p.activities.CUDA] if device == "cuda" else [])
        with p.public(activities=acts) as prof:
            try:
                yield
            finally:
                GUARD.restore()
                if device == "cuda":
                    _cuda_sync()
        names = {e.name for e in prof.events()}
        record["aten_ops"] = sorted(n for n in names if n.startswith("aten::"))
        record["gpu_kernels"] = []
        record["triton_launches"] = LaunchCounter.total() - start
        return
    activities = {p.cpu} | ({p.cuda} if device == "cuda" else set())
    p.prepare(p.config, activities)
    p.enable(p.config, activities)
    enabled_at = _time_ns()
    try:
        yield
    finally:
        GUARD.restore()
        if device == "cuda":
            _cuda_sync()
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
        names = {p.name(e) for e in events}
        record["aten_ops"] = sorted(n for n in names if n.startswith("aten::"))
        record["gpu_kernels"] = sorted({p.name(e) for e in events if p.device_type(e) == p.cuda_device})[:50]
        record["triton_launches"] = LaunchCounter.total() - start


# -- loading and describing ---------------------------------------------------------------------


def _trim(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE // 2] + "\n[...]\n" + text[-MAX_MESSAGE // 2 :]


def _describe_exception(exc: BaseException, submission: Path) -> dict[str, Any]:
    """The error as a student should see it: their own frames only, paths relative to the submission."""
    try:
        root = str(submission) + os.sep
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(root)]
        tb = "".join(traceback.format_list(frames[-10:])) + "".join(traceback.format_exception_only(type(exc), exc))
        tb = tb.replace(root, "")
        kind = type(exc).__name__
        if isinstance(exc, SystemExit):
            summary = f"the submission called sys.exit({exc.code!r})"
        elif isinstance(exc, KeyboardInterrupt):
            summary = "the submission raised KeyboardInterrupt"
        elif isinstance(exc, MemoryError):
            limit = resource.getrlimit(resource.RLIMIT_AS)[0]
            shown = f"{limit / (1 << 30):g} GiB" if limit != resource.RLIM_INFINITY else "the machine's memory"
            summary = f"MemoryError: out of memory (a worker may use at most {shown} of address space)"
        else:
            summary = f"{kind}: {exc}".replace(root, "")
            note = versions.hint(summary)  # an error only a Triton other than the grading one raises
            summary += f"\n{note}" if note else ""
        text = str(exc)
        fatal = isinstance(exc, torch.OutOfMemoryError) or "CUDA error" in text or "illegal memory access" in text
        return {"status": "error", "type": kind, "message": _trim(summary), "traceback": _trim(tb), "fatal": fatal}
    except BaseException:  # noqa: BLE001 - an exception whose str() or repr() itself fails
        return {"status": "error", "type": "Exception", "message": "the submission raised an exception whose message could not be read", "traceback": "", "fatal": False}


def load_function(submission: Path, module: str, function: str) -> Callable[..., Any]:
    """Import `module.py` from the submission folder and return its `function`."""
    path = submission / f"{module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"the submission has no {module}.py")
    sys.path.insert(0, str(submission))
    spec = importlib.util.spec_from_file_location(module, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[module] = mod
    spec.loader.exec_module(mod)
    fn = getattr(mod, function, None)
    if fn is None:
        raise AttributeError(f"{module}.py defines no {function}")
    if not callable(fn):
        raise TypeError(f"{module}.{function} is not callable")
    return fn


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


def describe_outputs(result: CallOutput, inputs: dict[str, Any], device: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Per output: the facts a copy would erase (exact type, layout, device, aliasing), and the copy.

    Only an exact `torch.Tensor` is looked at further: a subclass's methods are the student's code
    (`__torch_function__` would run, and could lie about its storage or device). The copy sent
    back is a plain, contiguous CPU tensor of a floating dtype, dense layout, or nothing.
    """
    spans = {k: _storage_span(v) for k, v in inputs.items() if isinstance(v, torch.Tensor)}
    meta: dict[str, Any] = {}
    payload: dict[str, Any] = {}
    for name, value in result.outputs.items():
        info = output_facts(value)
        payload[name] = None
        if info["exact"]:
            if value.layout == torch.strided and value.device.type in ("cpu", "cuda"):
                start, end = _storage_span(value)
                info["stride"] = list(value.stride())
                info["aliases"] = [k for k, (s, e) in spans.items() if start < e and s < end]
                if value.dtype in FLOAT_DTYPES:
                    payload[name] = value.detach().resolve_conj().resolve_neg().to("cpu").contiguous().clone()
        meta[name] = info
    meta["_notes"] = dict(result.notes)
    return meta, payload


# -- calls --------------------------------------------------------------------------------------


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
            b.dtype, b.device, b.shape, b.stride(), b.storage_offset(), b.untyped_storage().nbytes())

    def place(self, case: str, inputs: dict[str, Any]) -> dict[str, Any]:
        new = {k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)}
        old = self.tensors
        if case == self.case and old.keys() == new.keys() and all(self._same_layout(old[k], new[k]) for k in new):
            for k in new:
                _storage_bytes(old[k]).copy_(_storage_bytes(new[k]))
            return {**inputs, **old}
        self.case, self.tensors = case, new
        return inputs


FRESH = FreshInputs()


def handle_call(problem_name: str, fn: Callable[..., Any], header: dict[str, Any], blob: bytes, device: str, submission: Path) -> tuple[dict[str, Any], bytes]:
    problem = REGISTRY[problem_name]
    case = problem.case_model.model_validate(header["case"])
    inputs = FRESH.place(case.name, protocol.unpack_tensors(blob, map_location=device))
    before = input_bits(inputs)
    profile: dict[str, Any] = {}
    watch = (lambda: _profiled(profile, device)) if header.get("profile") else None
    # uninitialised memory is filled with NaN, so an output element the kernel never wrote shows
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    launches = LaunchCounter.total()
    error: BaseException | None = None
    started = _perf_counter()
    try:
        try:
            result = problem.call(fn, inputs, case, watch) if watch else problem.call(fn, inputs, case)
            if device == "cuda":
                _cuda_sync()
        finally:
            GUARD.restore()  # before any other name is looked up
    except BaseException as exc:  # noqa: BLE001 - the student's error is a result to report
        error = exc
    call_s = _perf_counter() - started
    tampering = GUARD.report()
    if tampering:
        return tampering, b""
    try:
        if error is not None:
            raise error
        meta, payload = describe_outputs(result, inputs, device)
    except BaseException as exc:  # noqa: BLE001
        return _describe_exception(exc, submission), b""
    changed = changed_inputs(inputs, before)
    reply = {
        "status": "ok",
        "meta": meta,
        "inputs_changed": changed,
        "triton_launches": LaunchCounter.total() - launches,
        "profile": profile or None,
        "call_s": round(call_s, 4),
    }
    return reply, protocol.pack_tensors(payload)


class Timer:
    """The worker's half of timing: the student's kernel on inputs it draws itself on the GPU.

    Benchmark inputs need no secrecy in their shape, so they are made here rather than shipped
    through the pipe; every timed round then gets new contents from the orchestrator's seeds, and
    a sample of rounds has a sample of its outputs sent back to be checked (`timed_rounds`).
    """

    def __init__(self, problem_name: str, fn: Callable[..., Any]) -> None:
        self.kind = REGISTRY[problem_name]
        self.fn = fn
        self.key: tuple[Any, ...] | None = None
        self.sets: list[dict[str, Any]] = []
        self.calls: list[Callable[[], Any]] = []
        #: None only when the orchestrator sends no round seeds (GRADER_UNVERIFIED_TIMING)
        self.rounds: timed_rounds.FreshRounds | None = None

    def _prepare(self, header: dict[str, Any]) -> Any:
        case = self.kind.case_model.model_validate(header["case"])
        key = (header["case"]["name"], header["seed"], header["sets"], header.get("refill_seed"), header.get("verify_seed"))
        if key != self.key:
            self.sets, self.calls, self.rounds, self.key = [], [], None, None
            torch.cuda.empty_cache()
            self.sets = [self.kind.make_inputs(case, generator(header["seed"] + i, "cuda")) for i in range(header["sets"])]
            self.calls = [self.kind.timed(self.fn, inputs) for inputs in self.sets]
            if "refill_seed" in header:
                self.rounds = timed_rounds.FreshRounds(self.kind, case, self.sets, int(header["refill_seed"]), int(header["verify_seed"]))
            self.key = key
        return case

    def handle(self, header: dict[str, Any], submission: Path) -> tuple[dict[str, Any], bytes]:
        # timing runs without the NaN fill of correctness calls: it would add a write to every empty()
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = False  # type: ignore[attr-defined]
        blob = b""
        try:
            try:
                case = self._prepare(header)
                profile: dict[str, Any] = {}
                if header.get("profile"):
                    # one call under exactly the watch correctness uses (`ProblemKind.call`): the
                    # same ops are looked for in the same part of the call (attention: the forward)
                    self.kind.call(self.fn, self.sets[0], case, lambda: _profiled(profile, "cuda"))
                launches = LaunchCounter.total()
                if header["op"] == "time":
                    measured = timing.measure(self.calls, header["budget_s"], warm=header.get("warm", True), min_s=float(header.get("min_s", 0.0)), hooks=self.rounds)
                    verified, payload = self.rounds.drain() if self.rounds else ([], {})
                    blob = protocol.pack_tensors(payload)
                    reply = {"status": "ok", "samples_s": measured.samples_s, "triton_launches": LaunchCounter.total() - launches, "profile": profile or None, "verified": verified}
                else:
                    wall = timing.loop_wall_time(self.calls[0], header["rounds"])
                    reply = {"status": "ok", "wall_s": wall, "triton_launches": LaunchCounter.total() - launches}
            finally:
                GUARD.restore()
        except BaseException as exc:  # noqa: BLE001
            reply, blob = _describe_exception(exc, submission), b""
        tampering = GUARD.report()
        return (tampering, b"") if tampering else (reply, blob)


# -- the loop -----------------------------------------------------------------------------------


def _forget_grader() -> None:
    """Drop the grader's modules from sys.modules: the submission cannot import the running copy."""
    for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
        del sys.modules[name]


def serve(args: argparse.Namespace) -> int:
    req_fd, rep_fd = args.req_fd, args.rep_fd
    for fd in (req_fd, rep_fd):
        os.set_inheritable(fd, False)
    if args.device == "cuda" and args.gpu_memory_fraction:
        try:
            torch.cuda.set_per_process_memory_fraction(args.gpu_memory_fraction)
        except (RuntimeError, ValueError):  # pragma: no cover - no GPU after all: the calls will say so
            pass
    seed, cache = os.environ.get("GRADER_KERNEL_SEED"), os.environ.get("TRITON_CACHE_DIR")
    if seed and cache:
        try:  # this submission's kernels from an earlier grading: compiled ones are not compiled again
            kernel_cache.restore_into(Path(seed), Path(cache))
        except OSError:
            pass
    student_runtime.prepare()  # the same process settings as pytest handout's
    imports.install(Path(args.submission), versions.graded().allowed_imports)  # refuses what the handout refuses
    LaunchCounter.install()
    GUARD.snapshot()
    _forget_grader()
    try:
        fn = load_function(Path(args.submission), args.module, args.function)
    except BaseException as exc:  # noqa: BLE001
        GUARD.restore()
        reply = _describe_exception(exc, Path(args.submission))
        reply["status"] = "import_error"
        protocol.send(rep_fd, reply)
        return 0
    GUARD.restore()  # replacements made at import fail every call (the list is kept)
    protocol.send(rep_fd, {"status": "ready"})
    timer: Timer | None = None
    while True:
        try:
            header, blob = protocol.recv(req_fd)
        except protocol.PeerGone:
            return 0
        if header.get("op") == "exit":
            return 0
        if header.get("op") in ("time", "loop"):
            timer = timer or Timer(args.problem, fn)
            reply, out = timer.handle(header, Path(args.submission))
        else:
            reply, out = handle_call(args.problem, fn, header, blob, args.device, Path(args.submission))
        protocol.send(rep_fd, reply, out)
        if reply.get("fatal"):
            return 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grader-worker")
    parser.add_argument("--submission", required=True)
    parser.add_argument("--problem", required=True)
    parser.add_argument("--module", required=True)
    parser.add_argument("--function", required=True)
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--req-fd", type=int, required=True)
    parser.add_argument("--rep-fd", type=int, required=True)
    parser.add_argument("--gpu-memory-fraction", type=float, default=None)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
