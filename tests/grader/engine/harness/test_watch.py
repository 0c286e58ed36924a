"""The watch inside the worker's process: the tamper guard (restores and names what a submission
replaced) and the Triton launch counter."""

from __future__ import annotations

import builtins
import time
from typing import Any

import pytest
import torch

from grader.engine.harness import watch


def test_guard_restores_and_names_every_replacement() -> None:
    guard = watch.Guard()
    guard.snapshot()
    originals = (time.perf_counter, builtins.sorted, torch.Tensor.clone, torch.cuda.Event, torch.allclose)
    assert "clone" not in vars(torch.Tensor)
    try:
        time.perf_counter = lambda: 0.0
        builtins.sorted = lambda *a, **k: []
        torch.Tensor.clone = lambda self: self  # type: ignore[method-assign]  # shadows TensorBase.clone
        torch.cuda.Event = object  # type: ignore[misc,assignment]
        torch.allclose = lambda *a, **k: True
        changed = guard.restore()
    finally:
        time.perf_counter, builtins.sorted, torch.cuda.Event, torch.allclose = (
            originals[0],
            originals[1],
            originals[3],
            originals[4],
        )  # type: ignore[misc]
        vars(torch.Tensor).get("clone") and delattr(torch.Tensor, "clone")
    assert set(changed) == {
        "time.perf_counter",
        "builtins.sorted",
        "torch.Tensor.clone",
        "torch.cuda.Event",
        "torch.allclose",
    }
    assert (time.perf_counter, builtins.sorted, torch.Tensor.clone, torch.cuda.Event, torch.allclose) == originals
    assert "clone" not in vars(torch.Tensor), "an added name that shadows the C method is removed"
    report = guard.report()
    assert report is not None and "builtins.sorted" in report.message
    assert guard.restore() == [] and guard.tampered, "restored now, but the record stays"


def test_guard_ignores_new_names_and_data() -> None:
    guard = watch.Guard()
    guard.snapshot()
    try:
        torch.__dict__["_grader_test_added"] = lambda: None
        builtins.__dict__["_grader_test_added"] = 1
        assert guard.restore() == [] and guard.report() is None
    finally:
        del torch.__dict__["_grader_test_added"], builtins.__dict__["_grader_test_added"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_guard_does_not_mistake_torch_compile_for_tampering() -> None:
    """A compiled backward is allowed (the student API): compiling must not look like patching."""
    guard = watch.Guard()
    guard.snapshot()

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return torch.compile(lambda g: g * 2)(grad)

    x = torch.randn(8, requires_grad=True)
    Double.apply(x).sum().backward()
    assert torch.equal(x.grad, torch.full((8,), 2.0))
    assert guard.restore() == []


def test_the_guard_reports_tampering_as_a_failed_reply() -> None:
    guard = watch.Guard()
    assert guard.report() is None
    guard.flag("time.perf_counter")
    report = guard.report()
    assert report is not None and report.status == "error" and report.type == "Tampering" and not report.fatal
    assert "time.perf_counter" in report.message and "scores 0" in report.message
