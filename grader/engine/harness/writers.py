"""The writer check: what a watched call returns holds what the submission's Triton kernels stored
in that call, moved since only by the kernel rule's copies.

The allow-list (`grader.engine.spec.op_names`) judges the PyTorch ops a forward runs; it cannot see code
that computes without PyTorch (NumPy on an array made from a tensor's address, a library reached
through ctypes) and writes the result into a tensor by its address. So, while a forward runs, the
grader keeps, for every storage the forward touches, the bytes it held after the last step the
grader saw write it, and who that was:

- a Triton launch of the submission (its bytes changed during the launch, or it was one of the
  launch's tensors and known before it): a kernel's output;
- a PyTorch op (through a dispatch mode of the harness's own): a copy (`copy_`, `_to_copy`,
  `clone`) passes on its source's writer, anything else (an allocation, a fill) is no kernel's;
- the call itself: the inputs.

Before each launch and each op that writes, and when the forward returns, every storage kept is
read again: bytes that changed with no launch or op to explain them were written outside PyTorch
and the submission's kernels, and the call fails. The tensor returned must be a kernel's output,
byte for byte. On a CPU bytes are read through their address (no op); on a GPU through a view and a
copy to the host, which the allow-list holds.

A kernel can copy as well as compute, so what a launch reads counts too: memory no PyTorch op made
(`torch.from_numpy` of NumPy's result, a kernel run past the dispatcher) is "from outside", and so
is everything a launch or a copy makes from it; the tensor returned must not be. Memory that
existed before the call (made at import, or in an earlier call) is what it is: the grader keeps a
weak registry of the storages alive when it last looked and of those its watch saw made.
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from grader.engine import protocol
from grader.engine.harness.recording import Recording
from grader.engine.spec import op_names

_cuda_sync = torch.cuda.synchronize
_string_at = ctypes.string_at
_len_modes = torch._C._len_torch_dispatch_stack
_mode_at = torch._C._get_dispatch_stack_at

#: the ops that copy their source's values: they pass on its writer (`to` and `contiguous` are
#: decomposed into `_to_copy` and `clone` before a dispatch mode sees them)
COPIES = frozenset({"aten::copy_", "aten::_to_copy", "aten::clone"})

#: the Writers of the watched call under way (None: none), read by the launch wrappers
ACTIVE: list[Writers | None] = [None]

#: storages made before the call under way: alive when the registry was last filled, or kept by a
#: watched call (weak references: a storage freed and its memory given to another is not known)
_KNOWN: dict[int, StorageWeakRef] = {}
#: the process's Triton launch count when the registry was last brought up to date (-1: never)
_SYNCED = [-1]
#: what "from outside" says of memory no PyTorch op made
UNMADE = (
    "memory no PyTorch op made in the call (torch.from_numpy, torch.tensor of computed values, a kernel run "
    "past the dispatcher)"
)


def _register(t: torch.Tensor) -> None:
    _KNOWN[_key(t)] = StorageWeakRef(t.untyped_storage())


def _known(t: torch.Tensor) -> bool:
    ref = _KNOWN.get(_key(t))
    return ref is not None and not ref.expired()


def _fill_registry() -> None:
    """Every plain tensor alive now is known (what the submission made at import or outside a
    watched call; tensors are tracked by Python's garbage collector)."""
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and _tensors(obj):
            _register(obj)


def _tensors(values: Any) -> list[torch.Tensor]:
    """The plain strided CPU or CUDA tensors among `values` (nested), and the tensors behind a
    `triton.reinterpret` wrapper or a host tensor descriptor (their `base`)."""
    found = []
    for value in tree_flatten(values)[0]:
        if type(value) is not torch.Tensor:
            base = getattr(value, "base", None) if not isinstance(value, torch.Tensor) else None
            value = base if type(base) is torch.Tensor else None
        if value is not None and value.layout == torch.strided and value.device.type in ("cpu", "cuda"):
            found.append(value)
    return found


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _bytes(t: torch.Tensor) -> bytes:
    """Every byte of the storage behind `t`."""
    storage = t.untyped_storage()
    if t.device.type == "cpu":
        return _string_at(storage.data_ptr(), storage.nbytes())
    n = storage.nbytes() // t.element_size()
    host = t.detach().as_strided((n,), (1,), 0).cpu()
    return _string_at(host.data_ptr(), n * t.element_size())


@dataclass
class _Kept:
    #: a tensor on the storage, held so its memory is not given to another while the call runs
    tensor: torch.Tensor
    data: bytes
    #: the kernel whose launch last wrote it (None: no kernel's)
    kernel: str | None
    #: how it was last written, in a student's words
    how: str
    #: an input of the call: given to a launch, it stays what the call was given
    is_input: bool = False
    #: what its values were made from outside PyTorch and the submission's kernels (None: nothing)
    foreign: str | None = None


class Writers:
    """What wrote each storage a forward touched; one per watched call."""

    def __init__(self, inside: list[int], launches: Callable[[], int]) -> None:
        #: the launch wrappers' depth: inside a launch, the ops are Triton's interpreter's own
        self.inside = inside
        #: the process's Triton launch count: launches outside a watched call mean submission code
        #: ran unwatched since, which may have made tensors the registry does not know
        self.launches = launches
        self.kept: dict[int, _Kept] = {}
        self.finding: protocol.Unwritten | None = None
        self.busy = False
        self.mode = _WriterMode(self)
        self._given: set[int] = set()
        #: the operator of the submission's own under way (`torch.library.custom_op`), if any: the
        #: mode cannot see inside it, so what is first seen there counts as made by it
        self.opaque: str | None = None

    # -- the call -------------------------------------------------------------------------------

    def start(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if _SYNCED[0] != self.launches():
            _fill_registry()
        for t in _tensors((args, kwargs)):
            self._keep(t, None, "given to the call")
            self.kept[_key(t)].is_input = True
        ACTIVE[0] = self
        self.mode.__enter__()

    def stop(self) -> bool:
        """End the watch; False when the mode was taken off PyTorch's stack by submission code."""
        ACTIVE[0] = None
        for kept in self.kept.values():
            if kept.foreign is None:
                _register(kept.tensor)
        _SYNCED[0] = self.launches()
        n = _len_modes()
        if n and _mode_at(n - 1) is self.mode:
            self.mode.__exit__(None, None, None)
            return True
        # another mode above it is left for the guard to take off and name; none at all: it was popped
        return any(_mode_at(i) is self.mode for i in range(n))

    def judge(self, result: Any) -> protocol.Unwritten | None:
        """Why `result` is not what the submission's kernels wrote (None: it is)."""
        if self.finding is not None or type(result) is not torch.Tensor or not _tensors(result):
            return self.finding
        if result.untyped_storage().nbytes() == 0:
            return None
        self._verify("before it was returned")
        if self.finding is not None:
            return self.finding
        kept = self.kept.get(_key(result))
        if kept is None:
            return protocol.Unwritten(what="not_written", detail="no Triton launch of yours wrote it or was given it")
        if kept.kernel is None:
            return protocol.Unwritten(what="not_written", detail=f"it was last {kept.how}")
        if kept.foreign is not None:
            return protocol.Unwritten(what="from_outside", detail=f"{kept.how}, from {kept.foreign}")
        return None

    # -- launches -------------------------------------------------------------------------------

    def before_launch(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        with self._quiet():
            self._verify("before a Triton launch")
            given = _tensors((args, kwargs))
            self._given = {_key(t) for t in given if _key(t) in self.kept}
            for t in given:
                self._first_sight(t)
            self._read = {_key(t) for t in given}

    def after_launch(self, kernel: Any, own: bool = True) -> None:
        """After a launch: what it changed, or was given, is its kernel's output. A launch made straight
        through the driver's launcher (`own` False: Inductor's generated kernels) is no kernel of the
        submission's: what it writes is from outside."""
        name = str(getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "a kernel"))
        with self._quiet():
            if any(kept.tensor.device.type == "cuda" for kept in self.kept.values()):
                _cuda_sync()  # a side stream's kernels too
            # what the launch made is from outside if anything it was given is
            foreign = next((self.kept[k].foreign for k in self._read if self.kept[k].foreign), None)
            if not own:
                foreign = "a Triton kernel launched past your code's launches (a generated one?)"
            for key, kept in self.kept.items():
                now = _bytes(kept.tensor)
                if now != kept.data or (key in self._given and not kept.is_input):
                    kept.data, kept.kernel, kept.how = now, name, f"written by your kernel {name}"
                    kept.foreign = kept.foreign or foreign

    # -- PyTorch ops ----------------------------------------------------------------------------

    def op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        schema = func._schema
        writes = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments) or any(
            r.alias_info is None for r in schema.returns
        )
        if not writes:  # a view: nothing is written
            return func(*args, **kwargs)
        name = schema.name
        with self._quiet():
            self._verify(f"before {name}")
        outer, own = self.opaque, not op_names.recorded(name, Recording.namespaces)
        if own:
            self.opaque = name
        try:
            out = func(*args, **kwargs)
        finally:
            self.opaque = outer
        with self._quiet():
            values = [*args, *[kwargs.get(a.name) for a in schema.arguments[len(args) :]]]
            written = [
                t
                for a, value in zip(schema.arguments, values)
                if a.alias_info is not None and a.alias_info.is_write
                for t in _tensors(value)
            ]
            source = None
            if name in COPIES and args:
                source = args[1] if name == "aten::copy_" and len(args) > 1 else args[0]
            kept = self._first_sight(source) if type(source) is torch.Tensor and _tensors(source) else None
            kernel = kept.kernel if kept is not None else None
            foreign = kept.foreign if kept is not None else None
            copied = f"copied by {name} from a tensor {kept.how}" if kernel and kept else ""
            inputs = {_key(t) for t in _tensors((args, kwargs))}
            fresh = [t for t in _tensors(out) if _key(t) not in inputs]
            for t, how in [(t, f"written by {name}") for t in written] + [(t, f"made by {name}") for t in fresh]:
                known = self.kept.get(_key(t))
                now = _bytes(t)
                if known is not None and now == known.data and not kernel and not foreign:
                    continue  # returned or rewritten as it was (a custom op returning its launch's output)
                self._keep(t, kernel, copied or how, now, foreign or (known.foreign if known else None))
        return out

    # -- bytes ----------------------------------------------------------------------------------

    @contextmanager
    def _quiet(self) -> Iterator[None]:
        """The check's own reads and copies: its dispatch mode lets them pass, not followed."""
        self.busy = True
        try:
            yield
        finally:
            self.busy = False

    def _keep(
        self, t: torch.Tensor, kernel: str | None, how: str, data: bytes | None = None, foreign: str | None = None
    ) -> None:
        if t.untyped_storage().nbytes() == 0:
            return
        self.kept[_key(t)] = _Kept(t.detach(), _bytes(t) if data is None else data, kernel, how, foreign=foreign)

    def _first_sight(self, t: torch.Tensor) -> _Kept | None:
        """Keep a storage not kept yet (made before the call, or by no op): what is kept for it."""
        if _key(t) not in self.kept:
            if _known(t):
                self._keep(t, None, "made before the call")
            elif self.opaque is not None:
                self._keep(t, None, f"made inside your operator {self.opaque}")
            else:
                self._keep(t, None, "made by no PyTorch op", foreign=UNMADE)
        return self.kept.get(_key(t))

    def _verify(self, when: str) -> None:
        for kept in self.kept.values():
            now = _bytes(kept.tensor)
            if now != kept.data:
                if self.finding is None:
                    self.finding = protocol.Unwritten(
                        what="changed_outside",
                        detail=f"a tensor {kept.how} changed {when} with no PyTorch op or Triton launch writing it",
                    )
                kept.data, kept.kernel, kept.how = now, None, "changed outside PyTorch and your kernels"


class _WriterMode(TorchDispatchMode):
    """Sees the PyTorch ops of a watched forward, outside Triton launches."""

    def __init__(self, writers: Writers) -> None:
        super().__init__()
        self.writers = writers

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        w = self.writers
        if w.busy or w.inside[0] > 0:
            return func(*args, **kwargs)
        return w.op(func, args, kwargs)
