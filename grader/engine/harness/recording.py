"""What the profiler cannot see by itself, watched beside it in the submission's process: ops run
past the dispatcher's RecordFunction, op recording switched off from Python, kernels registered
for PyTorch's own operators, modes left on PyTorch's stacks, and torch.compile'd code.

Like the launch counter (`grader.engine.harness.watch`), the wrappers are compiled apart from the grader's
globals; a submission that reads their closures reaches what they wrap (docs/defenses.md, known
holes).
"""

from __future__ import annotations

import builtins
import os
from importlib.machinery import SourceFileLoader
from typing import Any

import torch
import torch._dynamo.eval_frame as _eval_frame
import torch.autograd.profiler
from torch.utils._device import DeviceContext

from grader.engine.spec import op_names

_WRAPPER = """
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

def make_library(original, protected, torch_dir, namespaces, loader):
    bodies = {}

    def from_its_file(code):
        # a module's body is PyTorch's when it is the code PyTorch's file holds, not code compiled
        # under that file's name (`compile(source, torch_dir + "x.py", "exec")` names any file)
        path = code.co_filename
        if path not in bodies:
            try:
                bodies[path] = loader("body", path).get_code("body")
            except Exception:
                bodies[path] = None
        return bodies[path] is not None and bodies[path] == code

    def dispatch_library(kind, ns, *args, **kwargs):
        import sys
        frame = sys._getframe(1)
        # PyTorch registers as one of its modules is imported: the frames up to that module's body
        # are all PyTorch's; a registration the submission asks for (a custom op, or
        # `torch.library.impl("aten::...")`, whose Library is made inside torch) reaches its own first
        by_pytorch = False
        while frame is not None and frame.f_code.co_filename.startswith(torch_dir):
            if frame.f_code.co_name == "<module>":
                by_pytorch = from_its_file(frame.f_code)
                break
            frame = frame.f_back
        if by_pytorch:
            namespaces.add(ns)
        if ns in protected:
            if not by_pytorch:
                raise RuntimeError(
                    f"a submission may not register kernels for PyTorch's own operators ({ns}::...): "
                    "define your own operator namespace (torch.library.custom_op('mylib::name', ...))"
                )
        return original(kind, ns, *args, **kwargs)
    return dispatch_library
"""


#: operator namespaces whose kernels only PyTorch itself registers
_PROTECTED = frozenset({"aten", "prims", "profiler", "_c10d_functional", "c10d"})
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


class Recording:
    """What the profiler's op recording cannot see by itself, recorded beside it while a call is watched.

    - an op's kernel run past the dispatcher's RecordFunction (`OpOverload.redispatch`, `_op_dk`, a
      kernel fetched for a dispatch key and `call_boxed`) leaves no event; what it computes is memory
      no op made, which the writer check keeps out of the output (`grader.engine.harness.writers`).
    - a kernel registered for an aten op (`torch.library.Library("aten", "IMPL")`, or the public
      `torch.library.impl("aten::clone", ...)`, whose Library is made inside torch) would run inside
      the harness's own copies: registrations for PyTorch's namespaces are refused unless PyTorch
      makes them as one of its modules is imported (every frame up to that module's body is torch's,
      and that body is the code its file holds: a code's file name is the submission's to write).
    - `_enable_record_function(False)` and `_toggle_collection_dynamic(False, ...)` switch recording
      off from Python, `_clear_callbacks()` removes the profiler's: while a call is watched they
      are refused and reported as tampering (and `grader.engine.harness.calls.profiled` checks that its own
      marker was recorded at the end of the call).

    The wrappers are compiled apart from this module's globals, as the launch counter's are.
    """

    watching = [False]
    #: PyTorch's operator namespaces but `aten`'s, as registered before the submission is imported
    #: and by PyTorch's own modules afterwards: their ops are recorded (`grader.engine.spec.op_names`)
    namespaces: set[str] = set()
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
        make_switch, autograd = namespace["make_switch"], torch._C._autograd
        wrappers = {
            name: make_switch(getattr(autograd, name), cls.watching, cls.refused, f"{name}(False)")
            for name in ("_enable_record_function", "_toggle_collection_dynamic")
        }
        wrappers["_clear_callbacks"] = namespace["make_refusal"](
            torch._C._autograd._clear_callbacks,  # type: ignore[attr-defined]  # not in torch's stubs
            cls.watching,
            cls.refused,
            "_clear_callbacks()",
        )
        for name, wrapper in wrappers.items():
            for owner in (torch._C._autograd, torch.autograd, torch.autograd.profiler):
                if hasattr(owner, name):
                    setattr(owner, name, wrapper)
        cls.namespaces.update(op_names.pytorch_namespaces(torch._C._dispatch_get_all_op_names()))
        torch._C._dispatch_library = namespace["make_library"](
            torch._C._dispatch_library, _PROTECTED, _TORCH_DIR, cls.namespaces, SourceFileLoader
        )

    @classmethod
    def start(cls) -> None:
        cls.refused.clear()
        cls.watching[0] = True

    @classmethod
    def stop(cls) -> list[str]:
        """The recording switches refused since `start`."""
        cls.watching[0] = False
        return list(dict.fromkeys(cls.refused))


# -- mode stacks ----------------------------------------------------------------------------------

_len_dispatch_modes = torch._C._len_torch_dispatch_stack
_pop_dispatch_mode = torch._C._pop_torch_dispatch_stack
_len_function_modes = torch._C._len_torch_function_stack
_pop_function_mode = torch._C._pop_torch_function_stack
_push_function_mode = torch._C._push_on_torch_function_stack

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


# -- torch.compile where ops are checked ----------------------------------------------------------

# Code that torch.compile compiled runs inductor's generated kernels and records no aten op, so
# in the watched part of a call it is run as the eager code it was written as (dynamo's
# "force_eager" stance), whose ops the profiler sees. Bound at import, as the profiler is.
_set_stance = _eval_frame._set_stance
_FORCE_EAGER = _eval_frame.DynamoStance("force_eager")
#: profiler events that only compiled code records: one in a watched part means the stance was undone
COMPILED_EVENTS = (
    "Torch-Compiled Region",
    "TorchDynamo Cache Lookup",
    "## Call CompiledFxGraph",
    # TorchScript's fusers: a fused group runs as one event, its ops unseen (NNC's `fused_*` and its
    # `fallback_function`, oneDNN Graph's `LlgaPartition_*`, the groups' own `prim::` nodes)
    "fused_",
    "fallback_function",
    "LlgaPartition",
    "prim::TensorExprGroup",
    "prim::FusionGroup",
    "prim::oneDNNFusionGroup",
)


class CompiledAsEager:
    """A context in which every torch.compile'd function runs eagerly."""

    def __enter__(self) -> None:
        self.prior = _set_stance(_FORCE_EAGER)

    def __exit__(self, *exc: object) -> None:
        _set_stance(self.prior)


def compiled_events(names: set[str]) -> list[str]:
    """The events among `names` that compiled code recorded."""
    return sorted(n for n in names if n.startswith(COMPILED_EVENTS))[:10]
