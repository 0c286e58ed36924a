"""Inputs without data: a problem's own `make_inputs` run with its tensors made on the meta device.

A memory estimate needs inputs of a benchmark shape's exact shapes, dtypes and strides, but no
values: at 16384 x 16384 real CPU tensors would take seconds and gigabytes on a laptop. Rather than
each problem restating how its inputs are laid out, its `make_inputs` runs under `MetaFactories`,
which makes every tensor it creates on "meta" (shape, dtype, strides; no storage) and drops the
random generator (a meta tensor has no values to draw).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

META = torch.device("meta")


def meta_kwargs(kwargs: dict[str, Any], all_devices: bool) -> dict[str, Any]:
    """`kwargs` with a named device moved to meta and no generator.

    `all_devices=False` moves only an accelerator ("cuda", ...): a CPU tensor a submission makes
    on purpose is host memory on the GPU machine too, and stays on the CPU here.
    """
    device = kwargs.get("device")
    moved = dict(kwargs)
    if device is not None and torch.device(device).type != "meta":
        if all_devices or torch.device(device).type != "cpu":
            moved["device"] = META
    if moved.get("generator") is not None:
        moved["generator"] = None
    return moved


class MetaFactories(TorchDispatchMode):
    """Every op that names a device makes its tensor on meta; generators are dropped."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        return func(*args, **meta_kwargs(kwargs or {}, all_devices=True))


def on_meta(make: Any, *args: Any) -> Any:
    """`make(*args)` with the tensors it creates on the meta device."""
    with MetaFactories():
        return make(*args)
