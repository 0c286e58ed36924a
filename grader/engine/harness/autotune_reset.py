"""Autotuning done beside other gradings, forgotten so the GPU's exclusive window tunes again.

A benchmark shape's first calls compile the submission's kernels for that shape and autotune
them. Compiling is seconds of CPU that need not hold the GPU alone, so a grading makes those
first calls (`protocol.WarmRequest`) while other gradings' correctness calls share the GPU. But
an autotuner's pick is a timing: made beside other work, a near-tie could go the other way, and
the student's ratio would depend on who else was graded at the time. So, around a warm-up,
every `triton.Autotuner` in the process keeps its picks in memory only (`cache_results` off:
nothing tuned beside others reaches the kernel cache kept for the next grading), and after it
forgets them: the first timed call, alone on the GPU, benchmarks the configurations again,
which are compiled by then, so what the exclusive window pays is the benchmarking alone.

What this does not reach (docs/gpu-scheduling.md): tuning the submission does by hand, and
autotuners outside Triton's class (PyTorch Inductor's), keep what they picked in the warm-up.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from triton.runtime.autotuner import Autotuner


def autotuners() -> list[Autotuner]:
    """Every Triton autotuner alive in this process (module-level decorators and any made since).

    By the object's own type, not isinstance: isinstance asks the object for its __class__, which a
    dead weak proxy answers with ReferenceError and any object may answer with a lie."""
    return [obj for obj in gc.get_objects() if issubclass(type(obj), Autotuner)]


@contextmanager
def tuned_again_when_timed() -> Iterator[None]:
    """Around untimed first calls: picks kept off disk meanwhile, and every pick forgotten after."""
    saved = [(tuner, tuner.cache_results) for tuner in autotuners()]
    for tuner, _ in saved:
        tuner.cache_results = False
    try:
        yield
    finally:
        for tuner, cached in saved:
            tuner.cache_results = cached
        for tuner in autotuners():  # those the calls made too
            tuner.cache.clear()
