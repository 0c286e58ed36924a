"""The one error that stops a batch before it grades anything."""

from __future__ import annotations


class BatchError(RuntimeError):
    """The batch cannot start (bad folder, bad manifest, no image): nothing was graded."""
