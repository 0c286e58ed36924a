"""What a Triton kernel may call, enforced inside Triton's own code generator on every device.

Triton's code generator calls a function marked `__triton_builtin__` with its `_semantic` (it
emits IR), while Triton's interpreter calls the same function as plain Python with no semantic.
A submission's own "builtin" can therefore do one thing on the graded GPU and another on a CPU: a
red-team submission returned its input unchanged for the compiler (so the GPU compile check
passed) and computed GeLU in NumPy on the interpreter's arrays. Only Triton's own functions may be
builtins: one defined anywhere else is refused where the code generator meets it, on the GPU and
in the CPU's compile check alike, with the same message.

Triton's own means an object Triton's modules (and their classes) held when `install()` ran,
before the submission was imported, compared by identity; never what an object says of itself:
its `__module__`, `__name__`, `__triton_builtin__`, `__wrapped__` and its code's file are all a
submission's to write (`functools.partial` and `types.FunctionType(compile(src, "<Triton's
file>", ...))` forged them; a plain function that said its module was libdevice's was even swapped
by the code generator for the CUDA function of its name, while the interpreter ran it). The same
rule holds where Triton trusts such words itself: its hash skips a function marked builtin or of
libdevice's module, its code generator swaps a global of libdevice's module, and it calls a
bound method of a Triton value, a plain function found through a module or `getattr`, or a class,
as Python: each is refused unless it is Triton's. A name in Triton's language modules or classes
rebound after `install()` (`libdevice.tanh = forged`, `tl.tensor.__add__ = forged`) is refused at
every compile. The grader's own interpreter mends (`grader.engine.harness.interpreter_compat`) register
the objects they install with `trust()`.

A kernel may reference only `@triton.jit` functions, Triton's own and a few Python builtins: the
kernel's hash (`JITCallable.cache_key`, which Triton's compile takes first) walks every name its
body reads, a branch that never runs included, and refuses any other function ("Unsupported
function referenced"). Triton leaves the hash it was computing at a placeholder when that walk
raises, so the next compile of another specialization passed: on a GPU a submission lost only its
first case (a partial 9.09 where it should fail). Here the walk is redone every time, so every
compile refuses the kernel, on every device (the CPU's compile check takes the same hash:
`grader.engine.harness.gpu_compile`).

`install()` is called by `grader.engine.harness.student_runtime.prepare`, before the submission is
imported, in the worker and in `pytest handout`.
"""

from __future__ import annotations

import builtins
import copy
import functools
import importlib
import math
import sys
import types
from collections.abc import Iterator
from typing import Any

import triton.compiler.code_generator as code_generator
import triton.language.core as core
from triton.compiler import ASTSource
from triton.runtime import interpreter
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import DependenciesFinder, JITCallable

#: Triton's modules that a kernel reaches and Triton imports only when first used
_LAZY = ("triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "triton.language.math")
#: the modules whose functions a kernel calls: their names and their classes' are checked at every compile
_LANGUAGE = "triton.language"
#: the module whose functions Triton's hash skips and its code generator swaps, by their `__module__`
_LIBDEVICE = "triton.language.extra.libdevice"
#: what Triton compiles itself (called from a kernel, it is not run as Python by the code generator)
_COMPILED = (JITCallable, InterpretedFunction)
#: callables implemented in C: they run no code of the submission's
_C_CALLABLES = (types.BuiltinFunctionType, types.MethodWrapperType, types.WrapperDescriptorType)
_FUNCTIONS = (types.FunctionType, types.MethodType, functools.partial)
_TAIL = (
    " is not Triton's: only Triton's own functions may be builtins (the GPU compiler and Triton's "
    "interpreter call them differently); write it as a @triton.jit function"
)

_KEPT: list[Any] = []  # every trusted object, kept alive so that no other object ever takes its id
_TRUSTED: set[int] = set()
_WATCHED: list[tuple[str, Any]] = []  # (name, namespace): Triton's language modules and their classes
_installed = False


def trust(*objects: Any) -> None:
    """Count these objects as Triton's (the grader's stand-ins it installs into Triton's modules)."""
    for obj in objects:
        if id(obj) not in _TRUSTED:
            _KEPT.append(obj)
            _TRUSTED.add(id(obj))


def _held(value: Any) -> Iterator[Any]:
    """A namespace's value and the functions it holds (a static or class method's, a property's)."""
    yield value
    if isinstance(value, (staticmethod, classmethod)):
        yield value.__func__
    elif isinstance(value, property):
        yield from (f for f in (value.fget, value.fset, value.fdel) if f is not None)


def _take_registry() -> None:
    """Everything Triton's modules and their classes hold now (and Python's `builtins`, `math` and
    `copy`, which Triton lets a kernel use), before any submission is imported."""
    for name in _LAZY:
        importlib.import_module(name)
    triton_modules = [(n, m) for n, m in list(sys.modules.items()) if n == "triton" or n.startswith("triton.")]
    for name, module in [*triton_modules, ("builtins", builtins), ("math", math), ("copy", copy)]:
        trust(module)
        language = name == _LANGUAGE or name.startswith(_LANGUAGE + ".")
        if language:
            _WATCHED.append((name, module))
        for value in list(vars(module).values()):
            trust(*_held(value))
            if isinstance(value, type):
                for attr in list(vars(value).values()):
                    trust(*_held(attr))
                if language and value.__module__ == name:
                    _WATCHED.append((f"{name}.{value.__qualname__}", value))


def _unbound(fn: Any) -> Any:
    """The function of a bound method (a fresh object at every attribute access), by its exact type."""
    while type(fn) is types.MethodType:
        fn = fn.__func__
    return fn


def trusted(fn: Any) -> bool:
    """Is this object (a bound method's function) one Triton held before the submission was imported?"""
    return id(_unbound(fn)) in _TRUSTED


def _name(fn: Any) -> str:
    return str(getattr(fn, "__qualname__", None) or repr(fn))


def foreign_builtin(fn: Any) -> bool:
    """Marked as a Triton builtin, but not an object of Triton's."""
    return bool(getattr(fn, core.TRITON_BUILTIN, False)) and not trusted(fn)


class ForeignBuiltin(TypeError):
    """What the code generator raises (and reports as the kernel's compile error)."""


def _refuse(what: str) -> ForeignBuiltin:
    return ForeignBuiltin(what + _TAIL)


def check_namespaces() -> None:
    """Refuse a compile while a name of Triton's language modules or classes holds what Triton did
    not (`tl.tensor.__add__ = ...`: the code generator and the interpreter call it differently)."""
    for where, namespace in _WATCHED:
        for attr, value in list(vars(namespace).items()):
            if type(value) is types.ModuleType or id(value) in _TRUSTED:
                continue
            if callable(value) or hasattr(type(value), "__get__"):
                raise _refuse(f"{where}.{attr} was set after Triton was imported, and")


def _check_call(fn: Any, args: list[Any], kws: dict[str, Any]) -> None:
    """A callee the code generator runs as Python (a builtin, a bound method, a class, a plain
    function) must be Triton's, and so must a function passed to it."""
    if foreign_builtin(fn):
        raise _refuse(f"{_name(fn)} is marked __triton_builtin__ but")
    if isinstance(fn, _COMPILED) or type(fn) in _C_CALLABLES:
        return
    if not trusted(fn):
        raise _refuse(f"{_name(fn)} is called from a kernel but")
    if type(fn) is types.MethodType:  # Triton's function, run on a value of a class that must be Triton's too
        owner = fn.__self__ if isinstance(fn.__self__, type) else type(fn.__self__)
        if not trusted(owner):
            raise _refuse(f"{_name(fn)} is called on a {owner.__qualname__}, which")
    for arg in [*args, *kws.values()]:
        arg = arg.value if isinstance(arg, core.constexpr) else arg
        if isinstance(arg, _FUNCTIONS) and not isinstance(arg, _COMPILED) and not trusted(arg):
            raise _refuse(f"{_name(arg)} is passed to {_name(fn)} in a kernel but")


def _refused_every_time(original: Any) -> property:
    """`JITCallable.cache_key` that forgets a hash whose computation raised (Triton keeps its
    recursion placeholder, which the next compile would take as the hash)."""

    def cache_key(self: Any) -> str:
        with self._hash_lock:
            try:
                return original(self)
            except BaseException:
                self.hash = None
                raise

    return property(cache_key)


def _checked_hash(original: Any) -> Any:
    """`ASTSource.hash`, which every compile takes first: refused while Triton's names are rebound."""

    def hash(self: Any) -> str:  # noqa: A001 - the method it stands for
        check_namespaces()
        return original(self)

    return hash


def _record_reference(original: Any) -> Any:
    """Triton's hash skips a value marked builtin or of libdevice's module: only Triton's own."""

    def record_reference(self: Any, val: Any, *args: Any, **kwargs: Any) -> Any:
        if foreign_builtin(val):
            raise _refuse(f"{_name(val)} is marked __triton_builtin__ but")
        if getattr(val, "__module__", None) == _LIBDEVICE and not trusted(val):
            raise _refuse(f"{_name(val)} says its module is {_LIBDEVICE} but")
        return original(self, val, *args, **kwargs)

    return record_reference


def _code_generator() -> None:
    """The code generator swaps a global by its `__module__` (libdevice's) and runs other callees as
    Python: keep the object itself unless it is Triton's, and refuse a callee that is not."""
    init, call = code_generator.CodeGenerator.__init__, code_generator.CodeGenerator.call_Function

    def __init__(self: Any, context: Any, prototype: Any, gscope: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        init(self, context, prototype, gscope, *args, **kwargs)
        for name, value in gscope.items():
            if self.gscope.get(name) is not value and type(value) is not types.ModuleType and not trusted(value):
                self.gscope[name] = value  # swapped for what it says of its module: the object itself

    def call_Function(self: Any, node: Any, fn: Any, args: list[Any], kws: dict[str, Any]) -> Any:
        if not isinstance(fn, (code_generator.BoundJITMethod, code_generator.BoundConstexprFunction)):
            _check_call(fn, args, kws)
        return call(self, node, fn, args, kws)

    code_generator.CodeGenerator.__init__ = __init__  # type: ignore[method-assign]
    code_generator.CodeGenerator.call_Function = call_Function  # type: ignore[method-assign]


def _restored_when_refused(original: Any) -> Any:
    """The interpreter's patching of Triton's modules for a launch, which asks `is_builtin` of every
    name: a refusal there puts back what it had patched (Triton's would leave the modules patched,
    and every later launch and compile broken)."""

    def _patch_builtin(pkg: Any, builder: Any, scope: Any) -> None:
        try:
            original(pkg, builder, scope)
        except ForeignBuiltin:
            scope.restore()
            raise

    return _patch_builtin


def install() -> None:
    """Take the registry of Triton's objects, then wrap `triton.language.core.is_builtin` (which the
    code generator and the interpreter ask), Triton's hash and its code generator's calls."""
    global _installed
    if _installed:
        return
    _installed = True
    _take_registry()
    JITCallable.cache_key = _refused_every_time(JITCallable.cache_key.fget)  # type: ignore[method-assign]
    ASTSource.hash = _checked_hash(ASTSource.hash)  # type: ignore[method-assign]
    DependenciesFinder.record_reference = _record_reference(DependenciesFinder.record_reference)  # type: ignore[method-assign]
    _code_generator()
    original = core.is_builtin

    def is_builtin(fn: Any) -> bool:
        if foreign_builtin(fn):
            raise _refuse(f"{_name(fn)} is marked __triton_builtin__ but")
        return original(fn)

    trust(is_builtin)
    core.is_builtin = is_builtin
    patch_builtin = _restored_when_refused(interpreter._patch_builtin)
    trust(patch_builtin)  # the interpreter copies its globals into the modules of the functions it runs
    interpreter._patch_builtin = patch_builtin
