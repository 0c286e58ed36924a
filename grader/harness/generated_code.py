"""Code that PyTorch generates and runs past the profiler's op recording, marked where it runs.

torch.compile's code runs eagerly in a watched call (`grader.harness.recording.CompiledAsEager`),
but Inductor can be reached past dynamo (`torch._inductor.compile` on a `make_fx` graph,
`compile_fx`, a graph loaded from its cache), AOTInductor runs a model compiled to a shared
library, `torch.cuda.jiterator` compiles and launches a CUDA kernel from a string, and NNC's
tensor expressions (`torch._C._te`) are compiled and run by its code generator: none of them
records the aten ops it stands for. Each entry point is wrapped to note a name in
`Recording.seen` while a call is watched; `grader.harness.recording.compiled_events` then finds it
there as it finds torch.compile's own events, and the kernel rule refuses the call. Inductor is
marked twice over: the `call` of every wrapper module it loads, and every kernel it compiled
(Triton's, launched through its `CachingAutotuner`; C++ ones, loaded through its bindings' code
cache), so that a generated module loaded afresh, or one kernel of it called alone, is seen too.

Inductor is imported lazily (0.7 s that most submissions never pay), so its three modules are
wrapped as they are imported, by a finder placed first on `sys.meta_path`; the guard
(`grader.harness.watch.Guard`) watches the wrapped names from then on and puts the finder back if
submission code removes it. The wrappers are compiled apart from the grader's globals, as the
launch counter's are.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from typing import Any

import torch

#: what a watched call notes when it runs generated code (each a prefix of
#: `grader.harness.recording.COMPILED_EVENTS`)
INDUCTOR_GRAPH = "Inductor's generated code (a compiled graph's call)"
INDUCTOR_KERNEL = "Inductor's generated code (a kernel it compiled)"
AOT_INDUCTOR = "AOTInductor's compiled model"
JITERATOR = "torch.cuda.jiterator's compiled kernel"
NNC = "TorchScript's NNC code generator (torch._C._te)"

_WRAPPER = """
def make_marked(original, watching, seen, label):
    def marked(*args, **kwargs):
        if watching[0]:
            seen.append(label)
        return original(*args, **kwargs)
    return marked

def make_reload(original, mark):
    def reload_python_module(*args, **kwargs):
        module = original(*args, **kwargs)
        call = getattr(module, "call", None)
        if callable(call):
            module.call = mark(call)
        return module
    return reload_python_module

def make_library_marks(original, mark):
    def load_library_inner(cls, *args, **kwargs):
        module = original(cls, *args, **kwargs)
        entry = getattr(module, cls.entry_function, None)
        if type(entry).__name__ == "builtin_function_or_method":  # not marked yet
            setattr(module, cls.entry_function, mark(entry))
        return module
    return load_library_inner
"""

_COMPILE_TASKS = "torch._inductor.runtime.compile_tasks"
_HEURISTICS = "torch._inductor.runtime.triton_heuristics"
_CODECACHE = "torch._inductor.codecache"


class _WrapOnImport(importlib.abc.MetaPathFinder):
    """Finds Inductor's modules as the path finder does, and wraps their entry points once loaded."""

    def __init__(self, wrap: Callable[[Any], None]) -> None:
        self.wrap = wrap

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in (_COMPILE_TASKS, _HEURISTICS, _CODECACHE):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loaded = spec.loader.exec_module
        wrap = self.wrap

        def exec_module(module: Any) -> None:
            loaded(module)
            wrap(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class GeneratedCode:
    """Installs the marks; `watching` and `seen` are `grader.harness.recording.Recording`'s."""

    finder: _WrapOnImport | None = None
    #: the Inductor modules wrapped (`wrap`, kept to wrap one loaded past the finder)
    wrapped: set[str] = set()
    wrap: Callable[[Any], None]
    _installed = False

    @classmethod
    def install(cls, watching: list[bool], seen: list[str], guard: Callable[[str, Any, str], None]) -> None:
        """Wraps what is loaded, and the rest as it is imported; `guard(label, owner, name)` is told
        of each name wrapped, to watch it from then on."""
        if cls._installed:
            return
        cls._installed = True
        namespace: dict[str, Any] = {"__builtins__": builtins}
        exec(_WRAPPER, namespace)  # noqa: S102 - a fixed string, compiled apart from this module's globals
        make_marked = namespace["make_marked"]

        def mark(label: str) -> Callable[[Any], Any]:
            return lambda original: make_marked(original, watching, seen, label)

        # (label, owner, names): entry points loaded with torch itself, wrapped now
        loaded: list[tuple[str, Any, tuple[str, ...]]] = []
        if hasattr(torch._C, "_cuda_jiterator_compile_and_launch_kernel"):
            loaded.append((JITERATOR, torch._C, ("_cuda_jiterator_compile_and_launch_kernel",)))
        te = getattr(torch._C, "_te", None)
        if te is not None:
            loaded += [(NNC, te.CodeGen, ("call", "call_raw")), (NNC, te.TensorExprKernel, ("run", "fallback"))]
        for runner in _aoti_runners():
            loaded.append((AOT_INDUCTOR, runner, tuple(n for n in vars(runner) if n.startswith(("run", "boxed_run")))))
        for label, owner, names in loaded:
            for name in names:
                setattr(owner, name, mark(label)(vars(owner)[name]))
                where = owner.__name__ if isinstance(owner, type(torch)) else f"{owner.__module__}.{owner.__qualname__}"
                guard(where, owner, name)
        reload, library = namespace["make_reload"], namespace["make_library_marks"]

        def wrap(module: Any) -> None:
            cls.wrapped.add(module.__name__)
            try:
                wrap_names(module)
            except (AttributeError, KeyError):  # pragma: no cover - another PyTorch layout: never break its import
                pass

        def wrap_names(module: Any) -> None:
            if module.__name__ == _COMPILE_TASKS:
                module._reload_python_module = reload(module._reload_python_module, mark(INDUCTOR_GRAPH))
                guard(module.__name__, module, "_reload_python_module")
            elif module.__name__ == _CODECACHE:
                # it binds compile_tasks' function by name as it loads: the wrapped one, unless it
                # was loaded before the grader
                module._reload_python_module = sys.modules[_COMPILE_TASKS]._reload_python_module
                guard(module.__name__, module, "_reload_python_module")
                # the C++ kernels (and C++ wrappers) it builds for a CPU, whoever calls them
                bindings = module.CppPythonBindingsCodeCache
                loader = vars(bindings)["_load_library_inner"].__func__
                bindings._load_library_inner = classmethod(library(loader, mark(INDUCTOR_KERNEL)))
                guard("Inductor's CppPythonBindingsCodeCache", bindings, "_load_library_inner")
            elif module.__name__ == _HEURISTICS:
                autotuner = module.CachingAutotuner
                autotuner.run = mark(INDUCTOR_KERNEL)(autotuner.run)
                guard("Inductor's CachingAutotuner", autotuner, "run")

        # modules loaded before the grader (by PyTorch itself, or a test process) are wrapped now
        for name in (_COMPILE_TASKS, _CODECACHE, _HEURISTICS):
            if name in sys.modules:
                wrap(sys.modules[name])
        cls.finder = _WrapOnImport(wrap)
        cls.wrap = wrap
        sys.meta_path.insert(0, cls.finder)

    @classmethod
    def bypassed(cls) -> list[str]:
        """What let Inductor load unwrapped since the last look: the finder taken off `sys.meta_path`
        (put back first), a module of Inductor's imported past it (wrapped now; the graphs it
        loaded meanwhile are not)."""
        if cls.finder is None:
            return []
        found = []
        if cls.finder not in sys.meta_path:
            sys.meta_path.insert(0, cls.finder)
            found.append("sys.meta_path (the grader's finder of Inductor's modules)")
        for name in (_COMPILE_TASKS, _CODECACHE, _HEURISTICS):
            if name in sys.modules and name not in cls.wrapped:
                cls.wrap(sys.modules[name])
                found.append(f"sys.meta_path ({name} imported past the grader's finder)")
        return found


def _aoti_runners() -> list[type]:
    """AOTInductor's model runners and package loader (C++ classes, their methods assignable)."""
    aoti = getattr(torch._C, "_aoti", None)
    if aoti is None:  # pragma: no cover - a PyTorch built without AOTInductor
        return []
    return [
        value
        for name, value in vars(aoti).items()
        if isinstance(value, type) and ("Runner" in name or "Loader" in name)
    ]
