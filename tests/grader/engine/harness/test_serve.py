"""The worker's handling of requests: the replies it builds, and what a fresh worker process exposes.

Most tests call the worker's functions in this process (they are what the worker runs); the
last ones start real workers, because what matters there is the state of a fresh worker process
(what a submission can import, what `__main__` exposes). The call itself, its watch and its
descriptions are tested in test_calls.py and test_watch.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine import protocol
from grader.engine.assignment.load import load_assignment
from grader.engine.harness import serve as worker
from grader.engine.harness import watch
from grader.engine.judge.checks import check_call
from grader.engine.problems import REGISTRY
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.process import WorkerProcess
from tests.grader.worker_support import printed_at_import

GELU = REGISTRY["gelu"]
GELU_SPEC = load_assignment(hidden=False).problem("gelu")
CASE = GELU.case_model.model_validate({"name": "t", "suite": "cpu", "shape": [8, 16], "dtype": "float32"})
REQUEST = protocol.CallRequest(case=CASE.model_dump(), profile=True)


# -- requests as the worker handles them -------------------------------------------------------------


def test_a_tampering_call_fails_and_keeps_failing(clean_guard: watch.Guard) -> None:
    original = time.perf_counter

    def cheat(x: torch.Tensor) -> torch.Tensor:
        time.perf_counter = lambda: 0.0
        return torch.nn.functional.gelu(x, approximate="tanh")

    blob = protocol.pack_tensors(GELU.make_inputs(CASE, torch.Generator().manual_seed(1)))
    reply, out = worker.handle_call("gelu", cheat, REQUEST, blob, "cpu", Path("/nowhere"))
    assert time.perf_counter is original, "restored before anything else ran"
    assert isinstance(reply, protocol.Failed) and "time.perf_counter" in reply.message and out == b""
    honest = lambda x: x.clone()  # noqa: E731
    again, _ = worker.handle_call("gelu", honest, REQUEST, blob, "cpu", Path("/nowhere"))
    assert isinstance(again, protocol.Failed) and again.type == "Tampering", "once tampered, every later call fails"


def test_handle_call_reports_what_the_orchestrator_checks() -> None:
    inputs = GELU.make_inputs(CASE, torch.Generator().manual_seed(2))
    reply, out = worker.handle_call(
        "gelu",
        lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
        REQUEST,
        protocol.pack_tensors(inputs),
        "cpu",
        Path("/nowhere"),
    )
    assert isinstance(reply, protocol.Called) and reply.inputs_changed == [], reply
    assert reply.profile is not None and "aten::gelu" in reply.profile.aten_ops
    assert reply.meta["out"]["exact"] and reply.meta["out"]["shape"] == [8, 16]
    payload = protocol.unpack_tensors(out)
    assert torch.allclose(payload["out"].double(), GELU.expected(inputs, CASE)["out"], atol=1e-5)


# -- what the orchestrator does with a reply it cannot trust -----------------------------------------


def _expected() -> dict[str, torch.Tensor]:
    return {"out": torch.zeros(8, 16, dtype=torch.float64)}


GOOD_META = {
    "out": {
        "type": "torch.Tensor",
        "exact": True,
        "layout": "strided",
        "device": "cpu",
        "dtype": "float32",
        "shape": [8, 16],
        "stride": [16, 1],
        "aliases": [],
    }
}


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
    ids=[
        "meta-not-dict",
        "info-not-dict",
        "payload-not-dict",
        "value-not-tensor",
        "expanded",
        "huge-expanded",
        "sparse",
        "dtype-lie",
        "odd-types",
    ],
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
    # the wrappers' own namespace: their factories and builtins, nothing of the grader
    assert seen["run_globals"][0] == "__builtins__" and all(n.startswith("make") for n in seen["run_globals"][1:])
    assert not seen["path_has_root"]


def test_a_worker_told_to_exit_leaves_at_once_with_its_output(tmp_path: Path) -> None:
    """Without Python's finalization (a second or more with PyTorch loaded, waited for by the grading
    four times a submission): it exits by itself, with code 0, what it printed but never flushed
    reaches the record, and the submission's atexit hook does not run."""
    folder = tmp_path / "sub"
    folder.mkdir()
    source = "import atexit\natexit.register(print, 'atexit ran')\nprint('printed, not flushed', end='')\n"
    (folder / "gelu.py").write_text(source + "def triton_gelu(x):\n    return x\n")
    w = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        assert w.wait_ready(time.monotonic() + 60).status == "ready", w.output()
    finally:
        w.close()
    assert w.proc is not None and w.proc.returncode == 0, "it left by itself, not killed after the grace"
    assert "printed, not flushed" in w.stdout.text() and "atexit ran" not in w.stdout.text()
