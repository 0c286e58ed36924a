"""The worker's harness: what it records, what it refuses to trust, and what reaches the orchestrator.

Most tests call the worker's functions in this process (they are what the worker runs); the
last ones start real workers, because what matters there is the state of a fresh worker process
(what a submission can import, what `__main__` exposes).
"""

from __future__ import annotations

import builtins
import json
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import torch

from grader import protocol, worker
from grader.checks import check_call
from grader.problems import REGISTRY
from grader.problems.base import CallOutput
from grader.sandbox import SandboxConfig, Worker
from grader.spec import load_assignment
from tests.grader.worker_support import printed_at_import

GELU = REGISTRY["gelu"]
GELU_SPEC = load_assignment(hidden=False).problem("gelu")
CASE = GELU.case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8, 16], "dtype": "float32"})


@pytest.fixture
def clean_guard() -> Iterator[worker.Guard]:
    """The module's GUARD, snapshotted for the test and emptied afterwards."""
    worker.GUARD.snapshot()
    try:
        yield worker.GUARD
    finally:
        worker.GUARD.restore()
        worker.GUARD.saved, worker.GUARD.closed, worker.GUARD.saved_builtins, worker.GUARD.tampered = [], [], {}, []


# -- the tamper guard --------------------------------------------------------------------------------


def test_guard_restores_and_names_every_replacement() -> None:
    guard = worker.Guard()
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
        time.perf_counter, builtins.sorted, torch.cuda.Event, torch.allclose = originals[0], originals[1], originals[3], originals[4]  # type: ignore[misc]
        vars(torch.Tensor).get("clone") and delattr(torch.Tensor, "clone")
    assert set(changed) == {"time.perf_counter", "builtins.sorted", "torch.Tensor.clone", "torch.cuda.Event", "torch.allclose"}
    assert (time.perf_counter, builtins.sorted, torch.Tensor.clone, torch.cuda.Event, torch.allclose) == originals
    assert "clone" not in vars(torch.Tensor), "an added name that shadows the C method is removed"
    assert guard.report() is not None and "builtins.sorted" in guard.report()["message"]  # type: ignore[index]
    assert guard.restore() == [] and guard.tampered, "restored now, but the record stays"


def test_guard_ignores_new_names_and_data() -> None:
    guard = worker.Guard()
    guard.snapshot()
    try:
        torch.__dict__["_grader_test_added"] = lambda: None
        builtins.__dict__["_grader_test_added"] = 1
        assert guard.restore() == [] and guard.report() is None
    finally:
        del torch.__dict__["_grader_test_added"], builtins.__dict__["_grader_test_added"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_guard_does_not_mistake_torch_compile_for_tampering() -> None:
    """A compiled backward is allowed (DESIGN.md): compiling must not look like patching."""
    guard = worker.Guard()
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


# -- op recording ------------------------------------------------------------------------------------


def test_profiled_records_ops_run_on_other_threads() -> None:
    record: dict[str, Any] = {}
    x = torch.randn(16)
    with worker._profiled(record, "cpu"):
        thread = threading.Thread(target=lambda: torch.nn.functional.gelu(x))
        thread.start()
        thread.join()
    assert "aten::gelu" in record["aten_ops"] and record["triton_launches"] == 0


def test_profiled_notices_a_profiler_switched_off(clean_guard: worker.Guard) -> None:
    record: dict[str, Any] = {}
    with worker._profiled(record, "cpu"):
        torch.autograd._disable_profiler()
        torch.nn.functional.gelu(torch.randn(4))
    assert "aten::gelu" not in record["aten_ops"]
    assert clean_guard.tampered == ["the profiler (switched off during the call)"]


def test_profiled_notices_a_profiler_restarted(clean_guard: worker.Guard) -> None:
    from torch.autograd import ProfilerActivity, _enable_profiler, _prepare_profiler

    record: dict[str, Any] = {}
    with worker._profiled(record, "cpu"):
        torch.autograd._disable_profiler()
        torch.nn.functional.gelu(torch.randn(4))
        _prepare_profiler(worker.PROFILER.config, {ProfilerActivity.CPU})
        _enable_profiler(worker.PROFILER.config, {ProfilerActivity.CPU})
    assert clean_guard.tampered == ["the profiler (restarted during the call)"]


def test_a_tampering_call_fails_and_keeps_failing(clean_guard: worker.Guard) -> None:
    original = time.perf_counter

    def cheat(x: torch.Tensor) -> torch.Tensor:
        time.perf_counter = lambda: 0.0
        return torch.nn.functional.gelu(x, approximate="tanh")

    header = {"op": "call", "case": CASE.model_dump(), "profile": True}
    blob = protocol.pack_tensors(GELU.make_inputs(CASE, torch.Generator().manual_seed(1)))
    reply, out = worker.handle_call("gelu", cheat, header, blob, "cpu", Path("/nowhere"))
    assert time.perf_counter is original, "restored before anything else ran"
    assert reply["status"] == "error" and "time.perf_counter" in reply["message"] and out == b""
    honest = lambda x: x.clone()  # noqa: E731
    again, _ = worker.handle_call("gelu", honest, header, blob, "cpu", Path("/nowhere"))
    assert again["type"] == "Tampering", "once tampered, every later call fails"


def test_handle_call_reports_what_the_orchestrator_checks() -> None:
    header = {"op": "call", "case": CASE.model_dump(), "profile": True}
    inputs = GELU.make_inputs(CASE, torch.Generator().manual_seed(2))
    reply, out = worker.handle_call("gelu", lambda x: torch.nn.functional.gelu(x, approximate="tanh"), header, protocol.pack_tensors(inputs), "cpu", Path("/nowhere"))
    assert reply["status"] == "ok" and reply["inputs_changed"] == [], reply["message"]
    assert "aten::gelu" in reply["profile"]["aten_ops"]
    assert reply["meta"]["out"]["exact"] and reply["meta"]["out"]["shape"] == [8, 16]
    payload = protocol.unpack_tensors(out)
    assert torch.allclose(payload["out"].double(), GELU.expected(inputs, CASE)["out"], atol=1e-5)


# -- describing outputs and inputs -------------------------------------------------------------------


class Booby(torch.Tensor):
    """A subclass whose every torch call raises: describing it must not make any."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise RuntimeError("subclass code ran in the harness")


def test_describe_outputs_never_runs_a_subclass_or_reads_an_odd_tensor() -> None:
    x = torch.randn(4, 4)
    outputs = {
        "subclass": torch.randn(4, 4).as_subclass(Booby),
        "sparse": torch.eye(4).to_sparse(),
        "meta": torch.empty(4, 4, device="meta"),
        "alias": x.t(),
        "integer": torch.zeros(4, 4, dtype=torch.int32),
        "good": torch.randn(4, 4).t(),
        "lazy": (lambda: x),
    }
    meta, payload = worker.describe_outputs(CallOutput(outputs), {"x": x}, "cpu")
    assert meta["subclass"] == {"type": f"{__name__}.Booby", "exact": False} and payload["subclass"] is None
    assert meta["sparse"]["layout"] == "sparse_coo" and payload["sparse"] is None
    assert meta["meta"]["device"] == "meta" and payload["meta"] is None
    assert meta["alias"]["aliases"] == ["x"]
    assert meta["integer"]["dtype"] == "int32" and payload["integer"] is None
    assert payload["good"].is_contiguous() and torch.equal(payload["good"], outputs["good"])
    assert meta["lazy"]["exact"] is False and payload["lazy"] is None


def test_changed_inputs_sees_writes_between_the_elements_of_a_view() -> None:
    big = torch.randn(6, 10)
    inputs = {"x": big[:, ::2], "flag": True}
    before = worker.input_bits(inputs)
    assert worker.changed_inputs(inputs, before) == []
    big[:, 1] = 7.0  # outside the view
    assert worker.changed_inputs(inputs, before) == ["x"]


def test_changed_inputs_sees_a_storage_swapped_or_shrunk() -> None:
    inputs = {"x": torch.randn(8)}
    before = worker.input_bits(inputs)
    inputs["x"].untyped_storage().resize_(0)
    assert worker.changed_inputs(inputs, before) == ["x"]


def test_fresh_inputs_put_repeats_in_the_same_tensors() -> None:
    fresh = worker.FreshInputs()
    first = fresh.place("case", GELU.make_inputs(CASE, torch.Generator().manual_seed(1)))
    values = first["x"].clone()
    second = fresh.place("case", GELU.make_inputs(CASE, torch.Generator().manual_seed(2)))
    assert second["x"] is first["x"] and second["x"].data_ptr() == first["x"].data_ptr()
    assert not torch.equal(second["x"], values), "same tensor, new values"
    other = CASE.model_copy(update={"name": "other"})
    third = fresh.place("other", GELU.make_inputs(other, torch.Generator().manual_seed(3)))
    assert third["x"] is not first["x"]


# -- what the orchestrator does with a reply it cannot trust -----------------------------------------


def _expected() -> dict[str, torch.Tensor]:
    return {"out": torch.zeros(8, 16, dtype=torch.float64)}


GOOD_META = {"out": {"type": "torch.Tensor", "exact": True, "layout": "strided", "device": "cpu", "dtype": "float32", "shape": [8, 16], "stride": [16, 1], "aliases": []}}


@pytest.mark.parametrize(
    ("payload", "meta", "changed", "message"),
    [
        ({"out": torch.zeros(8, 16)}, "not a dict", [], "description of it is malformed"),
        ({"out": torch.zeros(8, 16)}, {"out": ["not", "a", "dict"]}, [], "description of it is malformed"),
        ("not a dict", GOOD_META, [], "the worker sent no values"),
        ({"out": "zeros"}, GOOD_META, [], "the worker sent str"),
        ({"out": torch.zeros(1).expand(8, 16)}, GOOD_META, [], "memory does not hold its elements"),
        ({"out": torch.zeros(1).expand(1 << 20, 1 << 20)}, GOOD_META, [], "do not match its own description"),
        ({"out": torch.zeros(8, 16).to_sparse()}, GOOD_META, [], "instead of a dense one"),
        ({"out": torch.zeros(8, 16, dtype=torch.float16)}, GOOD_META, [], "do not match its own description"),
        ({"out": torch.zeros(8, 16)}, {**GOOD_META, "_notes": "garbage"}, [1, None], "modified its input(s) 1, None"),
    ],
    ids=["meta-not-dict", "info-not-dict", "payload-not-dict", "value-not-tensor", "expanded", "huge-expanded", "sparse", "dtype-lie", "odd-types"],
)
def test_check_call_turns_any_forged_reply_into_a_verdict(payload: Any, meta: Any, changed: list, message: str) -> None:
    start = time.monotonic()
    verdict = check_call(GELU, GELU_SPEC, CASE, "cpu", _expected(), payload, meta, changed)
    assert not verdict.passed and message in verdict.message, verdict.message
    assert time.monotonic() - start < 1, "nothing large was materialised"


def test_check_call_passes_an_honest_reply() -> None:
    verdict = check_call(GELU, GELU_SPEC, CASE, "cpu", _expected(), {"out": torch.zeros(8, 16)}, GOOD_META, [])
    assert verdict.passed, verdict.message


# -- a fresh worker process ---------------------------------------------------------------------------


def test_a_submission_cannot_reach_the_running_harness_by_name(tmp_path: Path) -> None:
    probe = """
import json, sys
import __main__
import triton.runtime.jit as jit
print(json.dumps({
    "grader_modules": sorted(k for k in sys.modules if k == "grader" or k.startswith("grader.")),
    "main_names": sorted(k for k in vars(__main__) if not k.startswith("__")),
    "run_globals": sorted(jit.JITFunction.run.__globals__),
    "path_has_root": any(p.rstrip("/").endswith("/main") for p in sys.path),
}), flush=True)

def triton_gelu(x):
    return x
"""
    seen = printed_at_import(tmp_path, probe)
    assert seen["grader_modules"] == []
    assert seen["main_names"] == ["sys"]
    assert seen["run_globals"] == ["__builtins__", "make"]
    assert not seen["path_has_root"]
