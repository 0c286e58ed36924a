"""What watches a submission's code from inside its own process: a count of its Triton launches,
the profiler's C entry points bound before it is imported, and the tamper guard.

The submission runs in the process that watches it, so each of these is built to make forging
take deliberate effort (see `grader.worker`'s docstring and docs/defenses.md): the launch counter
lives in a closure whose globals hold nothing of the grader; the profiler is reached through
functions bound when this module was imported; the guard snapshots what the harness relies on
and restores and names whatever the submission replaced.
"""

from __future__ import annotations

import builtins
import gc
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

from grader import protocol  # noqa: E402

_MISSING = object()
_getprofile, _setprofile, _gettrace, _settrace = sys.getprofile, sys.setprofile, sys.gettrace, sys.settrace

# -- launch counting ----------------------------------------------------------------------------

_WRAPPER = """
def make(original, counter):
    def run(self, *args, **kwargs):
        if not kwargs.get("warmup", False):
            counter[0] += 1
        return original(self, *args, **kwargs)
    return run

def make_redispatch(original, watching, seen):
    def redispatch_boxed(self, *args, **kwargs):
        if watching[0]:
            seen.append(self.schema().name)
        return original(self, *args, **kwargs)
    return redispatch_boxed

def make_switch(original, watching, refused, label):
    def switch(*args, **kwargs):
        on = args[0] if args else next(iter(kwargs.values()), True)
        if watching[0] and not on:
            refused.append(label)
            return None
        return original(*args, **kwargs)
    return switch

def make_refusal(original, watching, refused, label):
    def refused_while_watched(*args, **kwargs):
        if watching[0]:
            refused.append(label)
            return None
        return original(*args, **kwargs)
    return refused_while_watched

def make_op_dk(watching, seen, raw_by_op):
    def get(self):
        raw = raw_by_op[id(self)]
        if not watching[0]:
            return raw
        name = self._schema.name
        def op_dk(*args, **kwargs):
            seen.append(name)
            return raw(*args, **kwargs)
        return op_dk
    def put(self, value):
        raw_by_op[id(self)] = value
    return property(get, put)

def make_operation_overload(original, watching, seen):
    def get_operation_overload(name, overload):
        op, op_dk, *rest = original(name, overload)
        def recorded(*args, **kwargs):
            if watching[0]:
                seen.append(name)
            return op_dk(*args, **kwargs)
        return (op, recorded, *rest)
    return get_operation_overload

def make_library(original, protected, torch_dir):
    def dispatch_library(kind, ns, *args, **kwargs):
        if ns in protected:
            import sys
            caller = sys._getframe(1).f_code.co_filename
            site = args[1] if len(args) > 1 else kwargs.get("file", "")
            if not (caller.startswith(torch_dir) and str(site).startswith(torch_dir)):
                raise RuntimeError(
                    f"a submission may not register kernels for PyTorch's own operators ({ns}::...): "
                    "define your own operator namespace (torch.library.custom_op('mylib::name', ...))"
                )
        return original(kind, ns, *args, **kwargs)
    return dispatch_library

def make_getitem(original, counter):
    def __getitem__(self, grid):
        runner = original(self, grid)
        def launch(*args, **kwargs):
            counter[0] += 1
            return runner(*args, **kwargs)
        return launch
    return __getitem__
"""


class LaunchCounter:
    """Counts Triton kernel launches by wrapping `run` of Triton's JIT and interpreter functions,
    and the launcher of a compiled kernel (`kernel = f.warmup(...); kernel[grid](...)`, as Triton's
    fused-softmax tutorial launches: it bypasses `run`).

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
        try:
            from triton.compiler.compiler import CompiledKernel
        except ImportError:  # pragma: no cover - Triton laid out otherwise
            return
        CompiledKernel.__getitem__ = namespace["make_getitem"](CompiledKernel.__getitem__, cls._counter)


#: operator namespaces whose kernels only PyTorch itself registers
_PROTECTED = frozenset({"aten", "prims", "profiler", "_c10d_functional", "c10d"})
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


class Recording:
    """What the profiler's op recording cannot see by itself, recorded beside it while a call is watched.

    - `OpOverload.redispatch` (`_DispatchOperatorHandle.redispatch_boxed`) runs an op's kernel past
      the dispatcher's RecordFunction: a forbidden op called that way left no event. Its name is
      noted here instead (PyTorch's own custom-op wrappers redispatch too: their names are noted,
      not refused).
    - `OpOverload._op_dk` (and the `op_dk` of `torch._C._get_operation_overload`) calls an op's
      kernel for one dispatch key, past RecordFunction too: noted the same way.
    - a kernel registered for an aten op (`torch.library.Library("aten", "IMPL")`) would run inside
      the harness's own copies: registrations for PyTorch's namespaces are refused unless PyTorch
      itself makes them (its lazily imported modules do).
    - `_enable_record_function(False)` and `_toggle_collection_dynamic(False, ...)` switch recording
      off from Python, `_clear_callbacks()` removes the profiler's: while a call is watched they
      are refused and reported as tampering (and `grader.calls.profiled` checks that its own
      marker was recorded at the end of the call).

    The wrappers are compiled apart from this module's globals, as the launch counter's are.
    """

    watching = [False]
    seen: list[str] = []
    refused: list[str] = []
    _installed = False

    @classmethod
    def install(cls) -> None:
        if cls._installed:
            return
        cls._installed = True
        # the real builtins: PyTorch's argument parsing imports through the calling frame's
        namespace: dict[str, Any] = {"__builtins__": builtins}
        exec(_WRAPPER, namespace)  # noqa: S102 - a fixed string, compiled apart from this module's globals
        handle = torch._C._DispatchOperatorHandle
        handle.redispatch_boxed = namespace["make_redispatch"](handle.redispatch_boxed, cls.watching, cls.seen)
        make_switch, autograd = namespace["make_switch"], torch._C._autograd
        wrappers = {
            name: make_switch(getattr(autograd, name), cls.watching, cls.refused, f"{name}(False)")
            for name in ("_enable_record_function", "_toggle_collection_dynamic")
        }
        wrappers["_clear_callbacks"] = namespace["make_refusal"](
            torch._C._autograd._clear_callbacks, cls.watching, cls.refused, "_clear_callbacks()"
        )
        for name, wrapper in wrappers.items():
            for owner in (torch._C._autograd, torch.autograd, torch.autograd.profiler):
                if hasattr(owner, name):
                    setattr(owner, name, wrapper)
        # each op's raw `_op_dk` leaves the instance (whose __dict__ anyone can read) for a table
        raw_by_op: dict[int, Any] = {}
        overload = torch._ops.OpOverload
        for op in [o for o in gc.get_objects() if type(o) is overload and "_op_dk" in vars(o)]:
            raw_by_op[id(op)] = vars(op).pop("_op_dk")
        overload._op_dk = namespace["make_op_dk"](cls.watching, cls.seen, raw_by_op)
        torch._C._dispatch_library = namespace["make_library"](torch._C._dispatch_library, _PROTECTED, _TORCH_DIR)
        torch._C._get_operation_overload = namespace["make_operation_overload"](
            torch._C._get_operation_overload, cls.watching, cls.seen
        )

    @classmethod
    def start(cls) -> None:
        cls.seen.clear()
        cls.refused.clear()
        cls.watching[0] = True

    @classmethod
    def stop(cls) -> tuple[list[str], list[str]]:
        """(ops redispatched, recording switches refused) since `start`."""
        cls.watching[0] = False
        return list(dict.fromkeys(cls.seen)), list(dict.fromkeys(cls.refused))


# -- mode stacks ----------------------------------------------------------------------------------

_len_dispatch_modes = torch._C._len_torch_dispatch_stack
_pop_dispatch_mode = torch._C._pop_torch_dispatch_stack
_len_function_modes = torch._C._len_torch_function_stack
_pop_function_mode = torch._C._pop_torch_function_stack
_push_function_mode = torch._C._push_on_torch_function_stack
from torch.utils._device import DeviceContext  # noqa: E402

#: the modes `settle_modes` took off, never freed: a mode's `__del__` would run submission code later,
#: after the watch (pushing a mode again, say)
_TAKEN_OFF: list[Any] = []


def settle_modes() -> list[str]:
    """Take off PyTorch's mode stacks whatever submission code left there; name the dispatch modes.

    A TorchDispatchMode (or TorchFunctionMode) left active runs inside every torch call the harness
    makes afterwards: it could fill an output when the harness first reads it, after the watch, or
    skip the refill of a timed round's inputs. No dispatch mode survives submission code (leaving
    one is tampering); of the function modes only `torch.set_default_device`'s stays (honest code
    sets it at import).
    """
    left: list[str] = []
    while _len_dispatch_modes() > 0:
        mode = _pop_dispatch_mode(None)
        _TAKEN_OFF.append(mode)
        left.append(f"a TorchDispatchMode left active ({type(mode).__name__})")
    if _len_function_modes() > 0:
        kept = []
        while _len_function_modes() > 0:
            mode = _pop_function_mode()
            if type(mode) is DeviceContext:
                kept.append(mode)
            else:
                _TAKEN_OFF.append(mode)
        for mode in reversed(kept):
            _push_function_mode(mode)
    return left


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
        ("torch dispatcher", torch._C._DispatchOperatorHandle, ("redispatch_boxed",)),
        ("torch._ops.OpOverload", torch._ops.OpOverload, ("_op_dk", "redispatch")),
        ("torch._C", torch._C, ("_get_operation_overload",)),
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


# -- op recording -------------------------------------------------------------------------------


class _Profiler:
    """The C-level profiler entry points, bound at import so a submission cannot swap them."""

    def __init__(self) -> None:
        self.direct = False
        try:
            from torch._C._autograd import _KinetoEvent, _ProfilerResult
            from torch._C._profiler import _ExperimentalConfig
            from torch.autograd import (
                DeviceType,
                ProfilerActivity,
                ProfilerConfig,
                ProfilerState,
                _disable_profiler,
                _enable_profiler,
                _prepare_profiler,
            )

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


# -- torch.compile where ops are checked ----------------------------------------------------------

# Code that torch.compile compiled runs inductor's generated kernels and records no aten op, so
# in the watched part of a call it is run as the eager code it was written as (dynamo's
# "force_eager" stance), whose ops the profiler sees. Bound at import, as the profiler is.
import torch._dynamo.eval_frame as _eval_frame  # noqa: E402

_set_stance = _eval_frame._set_stance
_FORCE_EAGER = _eval_frame.DynamoStance("force_eager")
#: profiler events that only compiled code records: one in a watched part means the stance was undone
COMPILED_EVENTS = ("Torch-Compiled Region", "TorchDynamo Cache Lookup", "## Call CompiledFxGraph")


class CompiledAsEager:
    """A context in which every torch.compile'd function runs eagerly."""

    def __enter__(self) -> None:
        self.prior = _set_stance(_FORCE_EAGER)

    def __exit__(self, *exc: object) -> None:
        _set_stance(self.prior)


def compiled_events(names: set[str]) -> list[str]:
    """The events among `names` that compiled code recorded."""
    return sorted(n for n in names if n.startswith(COMPILED_EVENTS))[:10]
