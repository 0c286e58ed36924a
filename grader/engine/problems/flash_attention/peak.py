"""FlashAttention's estimated peak at a benchmark shape: the generic estimate with this problem's kind.

A module of its own: the kind imports the hint in memory_estimate.py, so the estimate that needs
the kind cannot live there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.engine.problems.flash_attention.kind import FlashAttention
from grader.engine.problems.memory_estimate import Estimate, estimate
from grader.engine.spec.model import Case


def estimate_peak_bytes(fn: Callable[..., Any], case: Case, submission: Path | None = None) -> Estimate:
    """The estimated peak of one forward + backward of `fn` at benchmark `case` (meta tensors)."""
    return estimate(FlashAttention(), fn, case, submission)
