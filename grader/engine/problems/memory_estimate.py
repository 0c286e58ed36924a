"""The GPU memory one call of a submission allocates at a benchmark shape, estimated without a GPU.

Each benchmark shape has a budget (`gpu_memory_gib`): what one timed call (`kind.timed`: for
FlashAttention the forward and the backward) may allocate beyond its inputs. The grader measures
it on the GPU; a student should learn it on a laptop first, in milliseconds. So the call runs on
meta tensors (shapes, dtypes and strides, no data, no compute) and every new storage an op makes
is counted until it dies: the peak of live bytes is the estimate.

- Allocations are seen through a TorchDispatchMode: an op's output whose storage is not one of
  its inputs' is new (views and in-place ops allocate nothing); a `weakref.finalize` on the
  storage subtracts it when it dies. The mode holds no tensor: only sizes and finalizers.
- Triton cannot launch on meta tensors: while estimating, a launch whose arguments include one
  does nothing (the kernel's outputs were allocated by the submission's `torch.empty`: counted).
- torch.compile does not trace under a dispatch mode: compiled functions run eagerly, so the
  estimate may be above what the compiled, fused version allocates; the note says so.
- What needs tensor values (`.item()`, `.cpu()`, numpy) or fails is reported, never raised.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sys
import sysconfig
import traceback
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from grader.engine.problems.meta import meta_kwargs
from grader.engine.spec.model import Case

if TYPE_CHECKING:
    from grader.engine.problems.base import ProblemKind

GIB = 1 << 30
aten = torch.ops.aten


def gib(nbytes: float) -> str:
    """Bytes as the write-up writes a budget: 16.3 GiB, 24 GiB, 0.002 GiB."""
    value = nbytes / GIB
    return f"{value:.3g} GiB" if value < 1 else f"{value:.1f}".removesuffix(".0") + " GiB"


@dataclass(frozen=True)
class Allocation:
    """One storage live at the peak, as the op that made it shaped it."""

    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class Estimate:
    """A benchmark shape's estimated peak against its budget; `peak_bytes` None: not estimated."""

    problem: str
    shape: str
    budget_bytes: int
    peak_bytes: int | None = None
    #: the storages live at the peak, largest first
    at_peak: tuple[Allocation, ...] = ()
    note: str = ""
    #: the submission raised NotImplementedError itself (the stub)
    not_implemented: bool = False
    #: over the budget: what the problem says is the likely cause (`ProblemKind.memory_hint`)
    hint: str = ""

    @property
    def fits(self) -> bool | None:
        return None if self.peak_bytes is None else self.peak_bytes <= self.budget_bytes

    def summary(self) -> str:
        """`n4096-d128-bf16: estimated peak 16.3 GiB of its 24 GiB budget`, or why there is none."""
        if self.peak_bytes is None:
            return f"{self.shape}: {self.note or 'could not be estimated'}"
        text = f"{self.shape}: estimated peak {gib(self.peak_bytes)} of its {gib(self.budget_bytes)} budget"
        return text + (f" ({self.note})" if self.note else "")

    def largest(self, count: int = 4) -> str:
        """The biggest storages live at the peak, alike ones counted once:
        `3 x (1, 16, 16384, 16384) float32 (16 GiB each)`."""
        groups = Counter((a.shape, a.dtype, a.nbytes) for a in self.at_peak)
        ranked = sorted(groups.items(), key=lambda item: -item[0][2] * item[1])[:count]
        return "; ".join(
            f"{n} x {tuple(shape)} {dtype} ({gib(size)}{' each' if n > 1 else ''})"
            for (shape, dtype, size), n in ranked
        )


class ValuesNeeded(RuntimeError):
    """The call reads a tensor's values, which a meta tensor does not have."""


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError):  # a tensor without a storage (sparse, nested)
        return None


def _refuse_reads(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Name the two ways code reads values (PyTorch's own meta errors are vaguer)."""
    if func is aten._local_scalar_dense.default:
        raise ValuesNeeded("it reads a tensor's value (.item(), int(t), float(t), .tolist(), or a tensor in an `if`)")
    if func in (aten._to_copy.default, aten.copy_.default):
        source = args[1] if func is aten.copy_.default else args[0]
        target = args[0].device if func is aten.copy_.default else kwargs.get("device")
        if source.device.type == "meta" and target is not None and torch.device(target).type != "meta":
            raise ValuesNeeded(f"it copies a tensor's values to {torch.device(target).type} (.cpu(), .to(), numpy)")


class LiveBytes(TorchDispatchMode):
    """Counts the bytes of the meta storages ops create while they live, and their peak."""

    #: `torch.library.wrap_triton` launches arrive as a higher-order op (on a GPU; the interpreter's
    #: run as themselves): a launch, so nothing to do on meta tensors
    supports_higher_order_operators = True

    def __init__(self) -> None:
        super().__init__()
        self.live = 0
        self.peak = 0
        self.at_peak: tuple[Allocation, ...] = ()
        self._tracked: dict[int, tuple[Allocation, weakref.finalize]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if isinstance(func, torch._ops.HigherOrderOperator):
            if func is torch.ops.higher_order.triton_kernel_wrapper_mutation:
                return None
            return func(*args, **(kwargs or {}))  # what it allocates inside is not seen
        kwargs = meta_kwargs(kwargs or {}, all_devices=False)  # device="cuda" is the GPU's memory: meta here
        _refuse_reads(func, args, kwargs)
        before = {_storage_key(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        out = func(*args, **kwargs)
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.device.type == "meta":
                self._note(t, before)
        return out

    def _note(self, t: torch.Tensor, before: set[int | None]) -> None:
        key = _storage_key(t)
        if key is None:
            return
        storage = t.untyped_storage()
        if key in self._tracked:  # an in-place op, a view: new only if it grew (resize_)
            old, finalizer = self._tracked[key]
            if storage.nbytes() > old.nbytes:
                self._tracked[key] = (Allocation(old.shape, old.dtype, storage.nbytes()), finalizer)
                self._add(storage.nbytes() - old.nbytes)
            return
        if key in before:  # a view of an input, or of what was made before the call
            return
        made = Allocation(tuple(t.shape), str(t.dtype).removeprefix("torch."), storage.nbytes())
        self._tracked[key] = (made, weakref.finalize(storage, self._freed, key))
        self._add(made.nbytes)

    def _add(self, nbytes: int) -> None:
        self.live += nbytes
        if self.live > self.peak:
            self.peak = self.live
            self.at_peak = tuple(sorted((a for a, _ in self._tracked.values()), key=lambda a: -a.nbytes))

    def _freed(self, key: int) -> None:
        made, _ = self._tracked.pop(key)
        self.live -= made.nbytes

    def close(self) -> None:
        """Stop counting: no finalizer of a storage still alive may call back later."""
        for _, finalizer in self._tracked.values():
            finalizer.detach()
        self._tracked.clear()


def _has_meta(values: Any) -> bool:
    for value in values:
        tensor = value if isinstance(value, torch.Tensor) else getattr(value, "base", None)  # a TensorDescriptor
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "meta":
            return True
    return False


def _skipping(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _has_meta(args) or _has_meta(kwargs.values()):
            return None
        return original(self, *args, **kwargs)

    return run


@contextmanager
def triton_launches_skipped() -> Iterator[None]:
    """Within: a Triton launch (JIT, interpreter, autotuner, heuristics) on meta tensors does nothing.
    Every `run` replaced is put back, the very object, whatever happens (the tamper guard checks)."""
    import triton.runtime.interpreter  # noqa: F401 - its class joins KernelInterface's subclasses
    from triton.runtime.jit import KernelInterface

    classes, todo = [], [KernelInterface]
    while todo:
        klass = todo.pop()
        classes.append(klass)
        todo += klass.__subclasses__()
    saved = [(klass, vars(klass)["run"]) for klass in classes if "run" in vars(klass)]
    try:
        for klass, original in saved:
            klass.run = _skipping(original)
        yield
    finally:
        for klass, original in saved:
            klass.run = original


@functools.cache
def _library_roots() -> tuple[str, ...]:
    import triton

    folders = (Path(torch.__file__).parent, Path(triton.__file__).parent, Path(__file__).parents[2])
    return (*(str(p.resolve()) + os.sep for p in folders), sysconfig.get_paths()["stdlib"] + os.sep)


def _prefixes(folder: Path) -> tuple[str, ...]:
    return (os.path.abspath(folder) + os.sep, os.path.realpath(folder) + os.sep)


def _inside(filename: str, submission: Path | None) -> bool:
    """Whether a frame or module is the submission's (without a folder: not a library's)."""
    if submission is None:
        return not os.path.realpath(filename).startswith(_library_roots())
    return os.path.abspath(filename).startswith(_prefixes(submission))


def where(exc: BaseException, submission: Path | None) -> str:
    """`flash_attention.py, line 71: s = q @ k` for the submission's innermost frame, or ''."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _inside(f.filename, submission)]
    if not frames:
        return ""
    frame = frames[-1]
    return f"{Path(frame.filename).name}, line {frame.lineno}: {(frame.line or '').strip()}"


def _submission_modules(fn: Callable[..., Any], submission: Path | None) -> list[Any]:
    if submission is not None:
        roots = _prefixes(submission)
        files = [(m, getattr(m, "__file__", None)) for m in list(sys.modules.values())]
        return [m for m, f in files if isinstance(f, str) and os.path.abspath(f).startswith(roots)]
    owner = getattr(fn, "__self__", fn)
    module = sys.modules.get(getattr(owner, "__module__", "") or "")
    return [module] if module is not None else []


def compiled_functions(fn: Callable[..., Any], submission: Path | None) -> list[str]:
    """The torch.compile'd functions a submission's modules define (what ran eagerly here)."""
    found = []
    for module in _submission_modules(fn, submission):
        for name, value in list(vars(module).items()):
            if hasattr(value, "_torchdynamo_orig_callable") or type(value).__name__ == "OptimizedModule":
                found.append(name)
    return sorted(found)


def estimate(kind: ProblemKind, fn: Callable[..., Any], case: Case, submission: Path | None = None) -> Estimate:
    """Run one timed call of `fn` at benchmark `case` on meta tensors and count its peak allocation.

    `submission` (the folder) lets a failure name the submission's file and line."""
    budget = int((case.gpu_memory_gib or 0) * GIB)
    shape = {"problem": kind.name, "shape": case.name, "budget_bytes": budget}
    inputs = kind.meta_inputs(case)
    counter = LiveBytes()
    try:
        step = kind.timed(fn, inputs)
        with triton_launches_skipped(), counter:
            step()
    except Exception as exc:  # noqa: BLE001 - a student's failure is reported, never raised
        # the stub's own NotImplementedError, not PyTorch's "no Meta kernel for this op"
        if isinstance(exc, NotImplementedError) and "meta" not in str(exc).lower():
            return Estimate(**shape, note=f"NotImplementedError: {exc}", not_implemented=True)
        at = where(exc, submission)
        reason = str(exc) if isinstance(exc, ValuesNeeded) else f"{type(exc).__name__}: {exc}"
        reason = reason.splitlines()[0][:300] if reason.strip() else type(exc).__name__
        return Estimate(**shape, note=f"could not be estimated: {reason}" + (f" ({at})" if at else ""))
    finally:
        counter.close()
    compiled = compiled_functions(fn, submission)
    note = (
        f"{', '.join(compiled)} ran eagerly here (torch.compile does not run on meta tensors); compiled, it may "
        "fuse operations and allocate less"
        if compiled
        else ""
    )
    result = Estimate(**shape, peak_bytes=counter.peak, at_peak=counter.at_peak, note=note)
    return result if result.fits else dataclasses.replace(result, hint=kind.memory_hint(case, result))
