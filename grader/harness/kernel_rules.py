"""What a Triton kernel may call, enforced inside Triton's own code generator on every device.

Triton's code generator calls a function marked `__triton_builtin__` with its `_semantic` (it
emits IR), while Triton's interpreter calls the same function as plain Python with no semantic.
A submission's own "builtin" can therefore do one thing on the graded GPU and another on a CPU: a
red-team submission returned its input unchanged for the compiler (so the GPU compile check
passed) and computed GeLU in NumPy on the interpreter's arrays. Only Triton's own functions may be
builtins: one defined anywhere else is refused where the code generator meets it, on the GPU and
in the CPU's compile check alike, with the same message.

A kernel may reference only `@triton.jit` functions, Triton's own and a few Python builtins: the
kernel's hash (`JITCallable.cache_key`, which Triton's compile takes first) walks every name its
body reads, a branch that never runs included, and refuses any other function ("Unsupported
function referenced"). Triton leaves the hash it was computing at a placeholder when that walk
raises, so the next compile of another specialization passed: on a GPU a submission lost only its
first case (a partial 9.09 where it should fail), and a compile made aside (whose ask computes the
hash first and, when that raises, falls back on Triton's compile) would lose none. Here the walk
is redone every time, so every compile refuses the kernel, on every device (the CPU's compile
check takes the same hash: `grader.harness.gpu_compile`).

`install()` is called by `grader.harness.student_runtime.prepare`, before the submission is
imported, in the worker, the compile server and `pytest handout`.
"""

from __future__ import annotations

import os
from typing import Any

import triton
import triton.language.core as core
from triton.runtime.jit import JITCallable

#: where builtins may be defined: Triton, and the grader's own interpreter mends (which stand in
#: for Triton's libdevice and math functions under the interpreter)
_HOMES = (os.path.dirname(triton.__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)
_MODULES = ("triton", "grader.harness")
_installed = False


def foreign_builtin(fn: Any) -> bool:
    """Marked as a Triton builtin, but defined outside Triton (its module, or its code's file)."""
    if not getattr(fn, core.TRITON_BUILTIN, False):
        return False
    module = getattr(fn, "__module__", None) or ""
    if not any(module == home or module.startswith(home + ".") for home in _MODULES):
        return True
    # the function and every function it says it wraps (`functools.wraps` copies a Triton
    # builtin's name, module and marker onto any function, not its code)
    seen: set[int] = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        code = getattr(fn, "__code__", None)
        if code is not None and not code.co_filename.startswith(_HOMES):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


class ForeignBuiltin(TypeError):
    """What the code generator raises (and reports as the kernel's compile error)."""


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


def install() -> None:
    """Wrap `triton.language.core.is_builtin`, which the code generator asks at every call, and
    `JITCallable.cache_key`, so that a kernel whose hash Triton refuses is refused at every compile."""
    global _installed
    if _installed:
        return
    _installed = True
    JITCallable.cache_key = _refused_every_time(JITCallable.cache_key.fget)  # type: ignore[method-assign]
    original = core.is_builtin

    def is_builtin(fn: Any) -> bool:
        if foreign_builtin(fn):
            name = getattr(fn, "__qualname__", None) or repr(fn)
            raise ForeignBuiltin(
                f"{name} is marked __triton_builtin__ but is not Triton's: only Triton's own functions may be "
                "builtins (the GPU compiler and Triton's interpreter call them differently); write it as a "
                "@triton.jit function"
            )
        return original(fn)

    core.is_builtin = is_builtin
