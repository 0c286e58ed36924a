"""The GPU work of a watched call by where it was launched from (`grader.engine.harness.device_activity`):
a kernel launched by no Triton launch and no PyTorch op is named; the submission's own launches,
the ops' copies and fills, and a range of the submission's own are not. GPU only."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from grader.engine.harness import calls, watch

pytestmark = pytest.mark.gpu


def _foreign(fn: Any) -> list[str]:
    watch.arm()
    record: dict[str, Any] = {}
    with calls.profiled(record, "cuda"):
        fn()
    return record["foreign_work"]


def test_a_triton_launch_copies_and_fills_are_not_foreign() -> None:
    from tests.grader.engine.harness.kernel_support import double

    x = torch.randn(4096, device="cuda")
    y = torch.zeros_like(x)

    def honest() -> None:
        with torch.profiler.record_function("my own range"):
            double[(64,)](x, y, 4096, B=64)
        y.clone().fill_(1.0).cpu()

    double[(64,)](x, y, 4096, B=64)  # compiled outside the watch
    torch.cuda.synchronize()
    assert _foreign(honest) == []


def test_a_kernel_launched_by_neither_is_named() -> None:
    gelu = torch.cuda.jiterator._create_jit_fn("template <typename T> T g(T x) { return x * x; }")
    x = torch.randn(4096, device="cuda")
    gelu(x)  # compiled outside the watch
    torch.cuda.synchronize()
    found = _foreign(lambda: gelu(x))
    assert len(found) == 1 and "g" in found[0]
