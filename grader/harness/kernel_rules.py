"""What a Triton kernel may call, enforced inside Triton's own code generator on every device.

Triton's code generator calls a function marked `__triton_builtin__` with its `_semantic` (it
emits IR), while Triton's interpreter calls the same function as plain Python with no semantic.
A submission's own "builtin" can therefore do one thing on the graded GPU and another on a CPU: a
red-team submission returned its input unchanged for the compiler (so the GPU compile check
passed) and computed GeLU in NumPy on the interpreter's arrays. Only Triton's own functions may be
builtins: one defined anywhere else is refused where the code generator meets it, on the GPU and
in the CPU's compile check alike, with the same message.

`install()` is called by `grader.harness.student_runtime.prepare`, before the submission is
imported, in the worker, the compile server and `pytest handout`.
"""

from __future__ import annotations

import os
from typing import Any

import triton
import triton.language.core as core

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


def install() -> None:
    """Wrap `triton.language.core.is_builtin`, which the code generator asks at every call."""
    global _installed
    if _installed:
        return
    _installed = True
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
