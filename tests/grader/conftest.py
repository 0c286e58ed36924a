"""Fixtures shared by the grader's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader.engine.harness import watch


@pytest.fixture
def clean_guard() -> Iterator[watch.Guard]:
    """The module's GUARD, snapshotted for the test and emptied afterwards."""
    watch.GUARD.snapshot()
    try:
        yield watch.GUARD
    finally:
        watch.GUARD.restore()
        watch.GUARD.saved, watch.GUARD.closed, watch.GUARD.saved_builtins, watch.GUARD.tampered = [], [], {}, []
