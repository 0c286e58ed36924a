"""Standard Triton under the interpreter: `@triton.autotune` picks a config without timing.

Triton's autotuner times every config with the active GPU driver's benchmarker. Under
`TRITON_INTERPRET=1` on a machine without a GPU there is no driver, so every autotuned kernel
fails with "0 active drivers" before it runs: a student following the lectures would lose every
CPU case for a decorator the write-up allows. Timing would mean nothing in the interpreter anyway,
so here the choice is made without timing, deterministically: the first config that survives the
kernel's own pruning (`prune_configs_by`), the same on every machine and every run.
`restore_value`, `reset_to_zero` and `pre_hook` keep their meaning: no config is run while
choosing, and the reset Triton does after choosing still happens. `@triton.heuristics` needs
nothing (it computes meta-parameters from the arguments, no driver involved).

Installed by the grader's worker before a submission is imported and by the handout's tests, in
the interpreter only; a GPU run is never touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

_INSTALLED = False


def interpreting() -> bool:
    try:
        from triton import knobs

        return bool(knobs.runtime.interpret)
    except (ImportError, AttributeError):  # pragma: no cover - an older Triton without knobs
        return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def untimed_bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None, **_: Any) -> list[float]:
    """A benchmarker that runs nothing and ranks every config equal: `min` keeps the first."""
    return [0.0] * (len(quantiles) if quantiles else 1)


def install() -> bool:
    """Make the autotuner choose without timing when the interpreter is on; True if installed."""
    global _INSTALLED
    if _INSTALLED:
        return True
    if not interpreting():
        return False
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - Triton without an autotuner module
        return False
    # `do_bench` is a cached property on Triton 3.x; a plain property wins over any per-instance
    # benchmarker (a `do_bench=` argument would also need a GPU)
    Autotuner.do_bench = property(lambda self: untimed_bench)  # type: ignore[assignment,method-assign]
    _INSTALLED = True
    return True
