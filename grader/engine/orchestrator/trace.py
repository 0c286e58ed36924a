"""Where a grading spends its wall time: with GRADER_TRACE=1, each phase prints its duration.

For staff tuning limits and for whoever speeds the grader up; off by default, costs nothing then.
Lines go to stderr as `[trace]   1.234 s  problem phase detail`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


def enabled() -> bool:
    return os.environ.get("GRADER_TRACE", "") not in ("", "0")


@contextmanager
def span(*label: object) -> Iterator[None]:
    if not enabled():
        yield
        return
    start = time.monotonic()
    try:
        yield
    finally:
        note(time.monotonic() - start, *label)


def note(seconds: object, *label: object) -> None:
    """A duration measured elsewhere, printed like a span's. It may come from the worker, which
    runs the submission's code, so anything but a number is skipped rather than trusted."""
    if not enabled():
        return
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return
    print(f"[trace] {value:8.3f} s  {' '.join(str(x) for x in label)}", file=sys.stderr, flush=True)
