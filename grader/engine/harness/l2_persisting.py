"""L2's persisting lines, returned to normal before each timed window of the student's side.

The L2 flush before every timed round (grader/engine/timing.py) writes twice the L2's size through
normal accesses. Lines a kernel marked *persisting* (a stream's access policy window, with the
context's persisting-L2 limit raised) survive such a flush, so a submission could keep its
inputs on chip between rounds and be timed faster than any fresh call runs. Before each window
the harness resets every persisting line to normal and sets the persisting limit back to 0, with
the CUDA driver's own calls, bound when this module loads (before the submission is imported).

What this does not stop: a submission that raises the limit and sets a window again inside every
call keeps what it loads in that call; only what earlier rounds left is returned to normal here
(docs/defenses.md). Where the driver call fails the window is timed as before, never a crash.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

#: CUlimit's CU_LIMIT_PERSISTING_L2_CACHE_SIZE (cuda.h)
_PERSISTING_LIMIT = 0x06


def _bind() -> tuple[Callable[[], int], Callable[[int, int], int]] | None:
    try:
        driver = ctypes.CDLL("libcuda.so.1")
        reset, set_limit = driver.cuCtxResetPersistingL2Cache, driver.cuCtxSetLimit
    except (OSError, AttributeError):  # no driver here (a CPU machine): nothing to reset
        return None
    reset.restype, reset.argtypes = ctypes.c_int, []
    set_limit.restype, set_limit.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_size_t]
    return reset, set_limit


_DRIVER = _bind()


def reset() -> bool:
    """Persisting lines back to normal and the persisting limit to 0; False where that failed."""
    if _DRIVER is None:
        return False
    reset_lines, set_limit = _DRIVER
    try:
        return reset_lines() == 0 and set_limit(_PERSISTING_LIMIT, 0) == 0
    except Exception:  # noqa: BLE001 (a driver that refuses is a fact for the record, not a crash)
        return False
