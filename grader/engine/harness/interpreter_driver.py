"""Triton's GPU driver where there is none: what Triton's tutorials ask of it, answered for the graded GPU.

Triton's tutorials start with `DEVICE = triton.runtime.driver.active.get_active_torch_device()` and
the fused-softmax one sizes its grid from the driver's device properties and from the registers
and shared memory of its kernel, compiled by `f.warmup(...)` and launched as `kernel[grid](...)`.
On a machine without a GPU, Triton's interpreter has no driver ("0 active drivers") and a warmup
compiles nothing (it returns None), so a tutorial-shaped submission that the GPU grades in full
scored zero on a CPU (`pytest handout`, a CPU grade).

`TargetOnly` is the driver such a process gets: it names the graded GPU's target, reports its
properties (`grader.engine.spec.gpu_limits.GPU_PROPERTIES`, or the orchestrator's GPU for the compile
server), gives tensors the CPU device, and launches nothing. Under the interpreter a warmup returns
an `InterpretedKernel`: the kernel compiled ahead of time for the graded GPU (sm_90), whose
registers and spills come from that binary (`cuobjdump`, shipped with Triton), and whose launch
runs the interpreter with the warmup's constants, as a compiled kernel's launch runs it on the GPU.
A process with a GPU driver keeps it: nothing here is installed there.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile
from types import SimpleNamespace
from typing import Any

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.interpreter import InterpretedFunction

from grader.engine.harness import gpu_compile
from grader.engine.spec import gpu_limits

_CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
_installed = [False]
#: compiled kernels by specialization: one AOT compile per kernel variant per process
_BINARIES: dict[Any, tuple[int, int, int]] = {}


class Properties:
    """`driver.active.utils`: what Triton's tutorials read at import (the SM count, shared memory)."""

    def __init__(self, properties: dict[str, Any] | None) -> None:
        self.properties = properties

    def get_device_properties(self, device: int = 0) -> dict[str, Any]:
        if self.properties is None:
            raise RuntimeError("no GPU here: the device's properties are unknown")
        return dict(self.properties)


class TargetOnly:
    """Triton's active driver in a process without a GPU: it names the target, launches nothing."""

    def __init__(self, target: GPUTarget, properties: dict[str, Any] | None = None) -> None:
        self.target = target
        self.utils = Properties(properties)

    def get_current_target(self) -> GPUTarget:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> torch.device:
        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        return torch.cuda


def _resources(cubin: bytes) -> tuple[int, int]:
    """(registers, spilled registers) of a compiled kernel, as the driver reports them on load."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        done = subprocess.run(
            [_CUOBJDUMP, "--dump-resource-usage", file.name], capture_output=True, text=True, timeout=60
        )
    found = re.search(r"REG:(\d+).*?LOCAL:(\d+)", done.stdout)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"cuobjdump could not read the kernel's resources: {done.stderr.strip()[-300:]}")
    return int(found.group(1)), int(found.group(2)) // 4  # the driver counts spills as local bytes / 4


def _binary(kernel: InterpretedFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int, int]:
    """(registers, spills, shared bytes) of this launch compiled for the graded GPU."""
    source, options, key, _ = gpu_compile.specialization(kernel, args, kwargs)
    if key not in _BINARIES:
        compiled = triton.compile(source, target=gpu_compile.TARGET, options=dataclasses.asdict(options))
        n_regs, n_spills = _resources(compiled.asm["cubin"])
        _BINARIES[key] = (n_regs, n_spills, int(compiled.metadata.shared))
    return _BINARIES[key]


class InterpretedKernel:
    """What `f.warmup(...)` returns under the interpreter: a compiled kernel's attributes, read from
    the kernel compiled for the graded GPU, and a launch (`kernel[grid](...)`) that runs `f` in the
    interpreter with the warmup's constants."""

    def __init__(self, fn: InterpretedFunction, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.fn, self.kwargs = fn, dict(kwargs)
        self.n_regs, self.n_spills, shared = _binary(fn, args, kwargs)
        self.n_max_threads = 32 * int(kwargs.get("num_warps", 4))
        self.name = fn.__name__
        self.metadata = SimpleNamespace(
            name=fn.__name__,
            shared=shared,
            num_warps=int(kwargs.get("num_warps", 4)),
            num_stages=int(kwargs.get("num_stages", 3)),
        )

    def _init_handles(self) -> None:
        """Loading the binary: here it was read when compiled."""

    def __getitem__(self, grid: Any) -> Any:
        def launch(*args: Any, **kwargs: Any) -> Any:
            # a compiled kernel's launch takes every parameter positionally, constants included;
            # those left out are the warmup's
            given = set(self.fn.arg_names[: len(args)]) | set(kwargs)
            constants = {k: v for k, v in self.kwargs.items() if k in self.fn.arg_names and k not in given}
            return self.fn.run(*args, grid=grid, warmup=False, **constants, **kwargs)

        return launch


def _warmup(self: InterpretedFunction, *args: Any, grid: Any, **kwargs: Any) -> InterpretedKernel:
    return InterpretedKernel(self, args, kwargs)


def _has_driver() -> bool:
    try:
        driver.active.get_current_target()
    except Exception:  # noqa: BLE001 - "0 active drivers" on a machine without a GPU; a broken CUDA install alike
        return False
    return True


def install() -> None:
    """Under the interpreter on a machine without a GPU: the stand-in driver and warmups."""
    if _installed[0] or _has_driver():
        return
    _installed[0] = True
    driver.set_active(TargetOnly(gpu_compile.TARGET, dict(gpu_limits.GPU_PROPERTIES)))
    InterpretedFunction.warmup = _warmup  # type: ignore[method-assign,assignment]
