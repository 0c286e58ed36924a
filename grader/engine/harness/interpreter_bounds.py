"""Memory bounds under Triton's interpreter: an access past a kernel's tensors is an error, not a crash.

The interpreter loads and stores through raw addresses in this very process. A `tl.load` or
`tl.store` past the end of a tensor (the classic bug: no mask on the last block) read or wrote
whatever lay there: a few elements past the end passed silently, corrupting the heap, and a
block past it killed the whole process ("double free or corruption", `Fatal Python error:
Aborted`, exit 134), taking `pytest handout` down without a summary and costing the grader a
worker killed by SIGABRT without a word about why.

Here every load, store and atomic of a launch checks that each address it touches under its mask
lies inside the storage of one of the tensors the launch was given (a strided view's whole
storage counts: its gaps are the kernel's to read); one that does not raises `OutOfBounds`,
naming the operation, the program and how far off it was, with what usually causes it. On a
GPU the same access reads another buffer's memory or stops the kernel with an illegal address.

Installed by `interpreter_compat.install` (interpreter only).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

HINT = (
    "this usually means an unmasked tl.load/tl.store past the end of a block: on the last block, pass "
    "mask=offsets < n (and other= for a load), or check the offsets' strides"
)


class OutOfBounds(IndexError):
    """A kernel under the interpreter touched memory outside every tensor it was given."""


#: (start, end) byte addresses of the storages the current launch was given
_SPANS: list[tuple[int, int]] = []


def _spans_of(value: Any, found: list[tuple[int, int]]) -> None:
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        found.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    elif isinstance(value, (tuple, list)):
        for item in value:
            _spans_of(item, found)
    elif hasattr(value, "base") and isinstance(getattr(value, "base", None), torch.Tensor):  # TensorDescriptor
        _spans_of(value.base, found)


def check(what: str, ptrs: Any, mask: Any, itemsize: int, program: Any) -> None:
    """Raise OutOfBounds when an address under `mask` is outside every tensor of the launch."""
    addresses = np.asarray(ptrs).astype(np.uint64)
    active = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape) if mask is not None else None
    if active is not None:
        addresses = addresses[active]
    addresses = addresses.reshape(-1)
    if addresses.size == 0:
        return
    inside = np.zeros(addresses.shape, dtype=bool)
    for start, end in _SPANS:
        inside |= (addresses >= start) & (addresses + itemsize <= end)
    if bool(inside.all()):
        return
    outside = addresses[~inside]
    nearest = ""
    if _SPANS:
        first = int(outside[0])
        start, end = min(_SPANS, key=lambda s: min(abs(first - s[0]), abs(first - s[1])))
        where = (first - end) // itemsize + 1 if first >= end else (start - first + itemsize - 1) // itemsize
        side = "past the end of" if first >= end else "before the start of"
        nearest = f"; the first is {where} element(s) {side} the nearest tensor"
    raise OutOfBounds(
        f"{what} in program {tuple(program)} touches memory outside every tensor passed to the kernel "
        f"({outside.size} of {addresses.size} addresses{nearest}). On a GPU this reads or writes another "
        f"buffer, or stops with an illegal memory access. Hint: {HINT}"
    )


def install() -> None:
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    executor = interpreter.GridExecutor
    init_args = executor._init_args_hst

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        found: list[tuple[int, int]] = []
        _spans_of(list(args_hst) + list(kwargs_hst.values()), found)
        _SPANS[:] = found
        return args_hst, kwargs_hst

    def itemsize(ptrs: Any) -> int:
        return max(1, ptrs.get_element_ty().primitive_bitwidth // 8)

    def guarded(original: Callable[..., Any], what: str, ptrs_at: int, mask_at: int | None) -> Callable[..., Any]:
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            # a tensor descriptor's load and store pass cache_modifier= and the like by keyword
            ptrs = args[ptrs_at]
            mask = args[mask_at].data if mask_at is not None and args[mask_at] is not None else None
            check(what, ptrs.data, mask, itemsize(ptrs), self.grid_idx or (0, 0, 0))
            return original(self, *args, **kwargs)

        return method

    executor._init_args_hst = _init_args_hst
    builder.create_masked_load = guarded(builder.create_masked_load, "tl.load", 0, 1)
    builder.create_masked_store = guarded(builder.create_masked_store, "tl.store", 0, 2)
    builder.create_atomic_rmw = guarded(builder.create_atomic_rmw, "an atomic read-modify-write", 1, 3)
    builder.create_atomic_cas = guarded(builder.create_atomic_cas, "tl.atomic_cas", 0, None)
