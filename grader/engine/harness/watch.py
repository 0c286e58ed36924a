"""What watches a submission's code from inside its own process: a count of its Triton launches,
the profiler's C entry points bound before it is imported, and the tamper guard.

The submission runs in the process that watches it, so each of these is built to make forging
take deliberate effort (see `grader.engine.harness.serve`'s docstring and docs/defenses.md): the launch counter
lives in a closure whose globals hold nothing of the grader; the profiler is reached through
functions bound when this module was imported; the guard snapshots what the harness relies on
and restores and names whatever the submission replaced.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import sys
import time
import types
from typing import Any

# the profiler's own log (Kineto) reports "gpuGetDeviceCount failed" on a CUDA build without a GPU:
# noise in a student's output; read when the profiler first starts, so setting it here is enough
os.environ.setdefault("KINETO_LOG_LEVEL", "5")

import torch  # noqa: E402
import torch.autograd.profiler  # noqa: E402
import torch.profiler  # noqa: E402
import torch.testing  # noqa: E402

from grader.engine import protocol  # noqa: E402
from grader.engine.harness import writers  # noqa: E402
from grader.engine.harness.profiler import PROFILER  # noqa: E402, F401  (the harness's modules read it here)
from grader.engine.harness.recording import DeviceContext, Recording, settle_modes  # noqa: E402

_MISSING = object()
_getprofile, _setprofile, _gettrace, _settrace = sys.getprofile, sys.setprofile, sys.gettrace, sys.settrace

# -- launch counting ----------------------------------------------------------------------------

_WRAPPER = """
def make(original, counter, inside, watching, span, label, writers, counts=True):
    def run(self, *args, **kwargs):
        if counts and not kwargs.get("warmup", False):
            counter[0] += 1
        inside[0] += 1
        try:
            if not watching[0]:
                return original(self, *args, **kwargs)
            w = writers[0] if inside[0] == 1 and not kwargs.get("warmup", False) else None
            if w is not None:
                w.before_launch(args, kwargs)
            with span(label):
                result = original(self, *args, **kwargs)
            if w is not None:
                w.after_launch(self)
            return result
        finally:
            inside[0] -= 1
    return run

def make_getitem(original, counter, inside, watching, span, label, writers):
    def __getitem__(self, grid):
        runner = original(self, grid)
        def launch(*args, **kwargs):
            counter[0] += 1
            inside[0] += 1
            try:
                if not watching[0]:
                    return runner(*args, **kwargs)
                w = writers[0] if inside[0] == 1 else None
                if w is not None:
                    w.before_launch(args, kwargs)
                with span(label):
                    result = runner(*args, **kwargs)
                if w is not None:
                    w.after_launch(self)
                return result
            finally:
                inside[0] -= 1
        return launch
    return __getitem__

def make_launcher_call(original, counter, inside, watching, writers):
    def __call__(self, *args, **kwargs):
        if inside[0] != 0:
            return original(self, *args, **kwargs)
        counter[0] += 1
        w = writers[0] if watching[0] else None
        if w is None:
            return original(self, *args, **kwargs)
        inside[0] += 1
        try:
            w.before_launch(args, kwargs)
            result = original(self, *args, **kwargs)
            w.after_launch(self, own=False)
            return result
        finally:
            inside[0] -= 1
    return __call__
"""


#: the profiler range each Triton launch runs in while a call is watched
LAUNCH = "grader: a Triton launch"


class LaunchCounter:
    """Counts Triton kernel launches by wrapping `run` of Triton's JIT and interpreter functions,
    the launcher of a compiled kernel (`kernel = f.warmup(...); kernel[grid](...)`, as Triton's
    fused-softmax tutorial launches: it bypasses `run`), and, on a GPU, the driver's launcher of
    a compiled kernel called from anywhere else (a torch.compile'd function launching the
    student's kernel does, through inductor): counted there only outside the other two, so a
    launch counts once.

    The wrapper is compiled in a namespace of its own: `JITFunction.run.__globals__` leads
    nowhere near the grader.
    """

    _counter = [0]
    _inside = [0]  # launches under way through `run` or `kernel[grid]`: the driver's launcher is not counted again

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
        # while a call is watched, each launch is a profiler range: the ops inside it (the
        # interpreter's own, on a CPU) are Triton's, not the submission's (`calls.judged_ops`)
        watched = (Recording.watching, torch.autograd.profiler.record_function, LAUNCH, writers.ACTIVE)
        for klass in targets:
            klass.run = namespace["make"](klass.run, cls._counter, cls._inside, *watched)
        # an autotuner's or heuristics' launch is watched for its writes as one launch: the writer
        # check reads the call's tensors once around it, not around each of its benchmark runs
        from triton.runtime.autotuner import Autotuner, Heuristics

        for klass in (Autotuner, Heuristics):
            klass.run = namespace["make"](klass.run, cls._counter, cls._inside, *watched, counts=False)
        launcher = cuda_launcher()
        if launcher is not None:
            # a launch made straight through the driver's launcher (Inductor's generated kernels are)
            # is not one of the submission's Triton launches: what it writes is no kernel of theirs
            launcher.__call__ = namespace["make_launcher_call"](
                launcher.__call__, cls._counter, cls._inside, Recording.watching, writers.ACTIVE
            )
        try:
            from triton.compiler.compiler import CompiledKernel
        except ImportError:  # pragma: no cover - Triton laid out otherwise
            return
        CompiledKernel.__getitem__ = namespace["make_getitem"](
            CompiledKernel.__getitem__, cls._counter, cls._inside, *watched
        )


def cuda_launcher() -> type | None:
    """Triton's CUDA launcher class (what every compiled kernel's launch goes through), if any."""
    try:
        from triton.backends.nvidia.driver import CudaLauncher
    except Exception:  # noqa: BLE001 - no NVIDIA backend in this Triton, or it cannot load here
        return None
    return CudaLauncher if "__call__" in vars(CudaLauncher) else None


# -- tamper guard -------------------------------------------------------------------------------

_ALL = None
_CACHED_BY_PYTHON = frozenset({"__slotnames__"})  # copyreg caches it on a class the first time one is pickled
_TIME = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time", "sleep")
_PROFILER_NAMES = (
    "_enable_record_function",
    "_clear_callbacks",
    "_enable_profiler",
    "_disable_profiler",
    "_prepare_profiler",
    "_profiler_enabled",
    "_toggle_collection_dynamic",
    "_enable_profiler_legacy",
    "_disable_profiler_legacy",
)


def _guarded() -> list[tuple[str, Any, tuple[str, ...] | None]]:
    """(label, owner, names or _ALL): what the harness, the checks and the timing rely on."""
    import triton.runtime.jit as jit

    owners: list[tuple[str, Any, tuple[str, ...] | None]] = [
        ("time", time, _TIME),
        ("os", os, ("read", "write")),
        ("json", json, ("dumps", "loads")),
        ("io", io, ("BytesIO",)),
        ("pickle", pickle, ("Pickler", "Unpickler", "dump", "dumps", "load", "loads")),
        (
            "torch",
            torch,
            (
                "allclose",
                "isclose",
                "equal",
                "empty",
                "empty_like",
                "zeros",
                "save",
                "load",
                "isnan",
                "isinf",
                "Tensor",
                "use_deterministic_algorithms",
            ),
        ),
        ("torch.Tensor", torch.Tensor, _ALL),
        (
            "torch.cuda",
            torch.cuda,
            (
                "Event",
                "Stream",
                "synchronize",
                "_sleep",
                "current_stream",
                "stream",
                "set_stream",
                "empty_cache",
                "get_device_properties",
                "current_device",
            ),
        ),
        ("torch.cuda.Event", torch.cuda.Event, _ALL),
        ("torch.testing", torch.testing, ("assert_close",)),
        ("torch.autograd", torch.autograd, _PROFILER_NAMES),
        ("torch._C._autograd", torch._C._autograd, _PROFILER_NAMES),
        ("torch.autograd.profiler", torch.autograd.profiler, ("profile", "record_function") + _PROFILER_NAMES),
        ("torch.autograd.profiler.profile", torch.autograd.profiler.profile, _ALL),
        ("torch.profiler", torch.profiler, ("profile", "ProfilerActivity", "record_function")),
        ("torch.profiler.profile", torch.profiler.profile, _ALL),
        ("triton JITFunction", jit.JITFunction, ("run",)),
        *([("triton CudaLauncher", cuda_launcher(), ("__call__",))] if cuda_launcher() is not None else []),
        ("torch.utils._device.DeviceContext", DeviceContext, _ALL),
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
        #: the profile and trace functions before any submission code (a debugger's, coverage's)
        self.hooks: tuple[Any, Any] | None = None

    def snapshot(self) -> None:
        self.hooks = (_getprofile(), _gettrace())
        self.saved_builtins = dict(self.builtins)
        self.saved, self.closed = [], []
        for label, owner, names in _guarded():
            entries = vars(owner)
            if names is _ALL and isinstance(owner, type):
                self.closed.append((label, owner, frozenset(entries)))
            for name in names if names is not _ALL else list(entries):
                value = entries.get(name, _MISSING)
                if value is _MISSING or not (
                    callable(value) or isinstance(value, (type, types.ModuleType, staticmethod, classmethod, property))
                ):
                    continue
                self.saved.append((label, owner, name, value))

    def restore(self) -> list[str]:
        """Put back whatever was replaced; return (and remember) what it was."""
        # first of all: a profile or trace function set by submission code runs at every call the
        # harness makes from here on (it could compute after the watch); put back the harness's own
        if self.hooks is not None:
            profile, trace = self.hooks
            if _getprofile() is not profile:
                _setprofile(profile)
            if _gettrace() is not trace:
                _settrace(trace)
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
        changed += settle_modes()
        for name in changed:
            self.flag(name)
        return changed

    def flag(self, what: str) -> None:
        if what not in self.tampered:
            self.tampered.append(what)

    def report(self) -> protocol.Failed | None:
        """The error every later reply carries once the submission has tampered with the harness."""
        if not self.tampered:
            return None
        return protocol.Failed(type="Tampering", message=tamper_message(self.tampered))


def tamper_message(names: list[str]) -> str:
    """What the grader and `pytest handout` both say when a submission replaced what they rely on."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return (
        f"the submission tampered with the grader's environment: {shown}. Replacing Python, PyTorch or Triton "
        "functions, or switching the profiler, is not allowed in a submission; the problem scores 0"
    )


GUARD = Guard()


def arm() -> None:
    """Install all that watches submission code, before it is imported (the worker and the handout
    alike): the launch counter and the recording beside the profiler, then the guard's snapshot,
    which must find them in place as the harness's own."""
    LaunchCounter.install()
    Recording.install()
    GUARD.snapshot()
