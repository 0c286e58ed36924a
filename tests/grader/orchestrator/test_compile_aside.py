"""Compiles made aside, from a real worker's ask to a real compile server's files, with the GPU's
lease let go of meanwhile. On a CPU: the worker is started as for a GPU (no interpreter), and its
submission points Triton at an sm_90 target itself; what it compiles at import is asked for."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from grader import protocol
from grader.orchestrator import compile_aside, gpu_lease
from grader.orchestrator.problem_clock import ProblemClock
from grader.records.model import Phases
from grader.sandbox.config import SandboxConfig
from grader.sandbox.process import WorkerDied, WorkerProcess
from grader.spec.load import load_assignment

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a compile server hides the GPU in a mount namespace (root)")
PROBLEM = load_assignment(hidden=False).problem("gelu").model_copy(update={"module": "kernels", "function": "solve"})

#: an ask for a kernel no submission here defines: what the server answers without compiling
ASK = protocol.CompileAsk(
    module="kernels", qualname="k", line=1, fn_key="", key="", backend="cuda", arch=90, warp_size=32, spec="{}"
)
#: a submission whose import needs the GPU, which a compile server hides
NEEDS_GPU = "import torch\ntorch.cuda.init()\n\ndef solve(x):\n    return x\n"


def _server(tmp_path: Path, source: str) -> compile_aside.CompileServer:
    """A compile server (not started) for a one-file submission `kernels.py`."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "kernels.py").write_text(source)
    return compile_aside.CompileServer(SandboxConfig(device="cuda", gpu_memory_fraction=None), folder, PROBLEM)


KERNELS = """
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime import driver


class Sm90:  # no GPU on this machine: the target the H200 would report, for the JIT's binder
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) + tl.load(y + i, mask=i < n), mask=i < n)


if __name__ != "__main__" and not torch.cuda.is_available() and hasattr(triton.compiler, "compile"):
    driver.set_active(Sm90())
    x = torch.zeros(256)
    for block in (64, 128):
        kernel = add.warmup(x, x, x, 256, BLOCK=block, grid=(1,))
        print("compiled", block, kernel.metadata.name, flush=True)


def solve(x):
    return x
"""


class Run:
    """The part of a ProblemRun a compile aside uses, on a lease of a test's own."""

    def __init__(self, aside: compile_aside.CompileServer, hold: gpu_lease.SharedHold) -> None:
        self.aside, self.hold, self.clock = aside, hold, ProblemClock(300)
        self.phases = Phases()
        self.events: list[str] = []

    def pause(self) -> None:
        self.events.append("paused")

    def _resume(self) -> None:
        self.events.append("resumed")

    def _waited(self, seconds: float) -> None:
        self.events.append("waited")
        self.clock.excuse(seconds)

    @property
    def deadline(self) -> float:
        return self.clock.deadline


@needs_root
def test_a_workers_compiles_at_import_are_made_aside_while_a_timer_holds_the_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(gpu_lease.ENV, str(tmp_path / "locks"))
    lease = gpu_lease.GpuLease("gpu-test")
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "kernels.py").write_text(KERNELS)
    config = SandboxConfig(device="cuda", gpu_memory_fraction=None)
    worker = WorkerProcess(config, folder, "gelu", "kernels", "solve", extra_args=("--compile-aside",))
    aside = compile_aside.CompileServer(config, folder, PROBLEM)
    timed: list[float] = []

    def timer() -> None:  # another grading's window: it gets the GPU only while the call lets go
        with lease.exclusive():
            timed.append(time.monotonic())
            time.sleep(0.5)

    try:
        with lease.shared() as hold:
            run = Run(aside, hold)
            deadline = run.deadline
            answer = compile_aside.asked_by(run)
            assert answer is not None

            def asked(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes, float]:
                if not timed:
                    threading.Thread(target=timer, daemon=True).start()
                    time.sleep(0.3)  # the timer is waiting for this call's hold
                return answer(ask)

            greeting = worker.wait_ready(time.monotonic() + 300, asked=asked)
            assert isinstance(greeting, protocol.Ready), worker.output()
        assert aside.compiled == 2 and aside.broken is None
        assert len(timed) == 1  # the window ran while the first kernel compiled aside
        assert run.events[:3] == ["paused", "waited", "resumed"]
        assert run.phases.compile_aside_s > aside.start_s > 0  # the server started at the first ask
        assert run.deadline > deadline + aside.start_s  # its start given back, and the wait for the window
    finally:
        worker.close()
        aside.close()
    printed = worker.output()
    assert "compiled 64 add" in printed and "compiled 128 add" in printed


@needs_root
def test_a_submission_that_needs_the_gpu_at_import_compiles_in_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(gpu_lease.ENV, str(tmp_path / "locks"))
    lease = gpu_lease.GpuLease("gpu-test")
    aside = _server(tmp_path, NEEDS_GPU)
    try:
        answer, blob = aside.compile(ASK, time.monotonic() + 120)
        assert not answer.compiled and "imported without a GPU" in answer.reason and blob == b""
        again, _ = aside.compile(ASK, time.monotonic() + 120)  # refused at once: the server is not started again
        assert not again.compiled and aside.process is None
        with lease.shared() as hold:  # and the grading keeps the GPU: no stop, no wait behind a timer
            run = Run(aside, hold)
            answer = compile_aside.asked_by(run)
            assert answer is not None
            refused, _, waited = answer(ASK)
            assert not refused.compiled and waited == 0.0 and run.events == []
    finally:
        aside.close()


def test_no_compile_is_made_aside_without_a_shared_hold() -> None:
    aside = compile_aside.server(True, SandboxConfig(device="cuda"), Path("."), PROBLEM)
    run = Run(aside, None)  # type: ignore[arg-type]
    in_the_window = compile_aside.asked_by(run)  # a timed window: refused, the worker compiles in it as before
    assert in_the_window is not None
    answer, blob, waited = in_the_window(ASK)
    assert not answer.compiled and "held alone" in answer.reason and (blob, waited) == (b"", 0.0)
    assert aside is not None and aside.process is None and run.events == []
    assert compile_aside.server(False, SandboxConfig(device="cuda"), Path("."), PROBLEM) is None


ASK_AT_IMPORT = """
import json, struct, sys, os
REPLY = int(sys.argv[sys.argv.index('--rep-fd') + 1])
head = json.dumps({"status": "compile", "module": "os", "qualname": "system", "line": 1, "fn_key": "",
                   "key": "", "backend": "cuda", "arch": 90, "warp_size": 32, "spec": "{}"}).encode()
os.write(REPLY, struct.pack('<Q', len(head)) + head)

def solve(x):
    return x
"""


@pytest.mark.parametrize("told", [False, True], ids=["not-told-it-may-ask", "told"])
def test_an_ask_is_read_only_from_a_worker_told_it_may_ask(tmp_path: Path, told: bool) -> None:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "kernels.py").write_text(ASK_AT_IMPORT)
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "kernels", "solve")
    answered: list[protocol.CompileAsk] = []

    def refuse(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes, float]:
        answered.append(ask)
        return protocol.CompileAnswer(compiled=False, reason="not for the test"), b"", 0.0

    try:
        if not told:
            with pytest.raises(WorkerDied, match="a reply of status 'compile' where 'ready' or 'import_error' was due"):
                worker.wait_ready(time.monotonic() + 60)
        else:
            # the forged ask is answered (here refused); the worker, which never reads the answer, goes
            # on to its greeting as any worker does
            assert isinstance(worker.wait_ready(time.monotonic() + 60, asked=refuse), protocol.Ready)
            assert [a.qualname for a in answered] == ["system"]
    finally:
        worker.close()


@needs_root
def test_a_server_started_beside_a_cold_worker_is_ready_by_the_first_ask(tmp_path: Path) -> None:
    aside = _server(tmp_path, "def solve(x):\n    return x\n")
    try:
        aside.start_soon()
        assert aside._starting is not None
        aside._starting.join(120)  # the worker's imports and the first case would run meanwhile
        answer, _ = aside.compile(ASK, time.monotonic() + 60)
        assert not answer.compiled and "no kernel kernels.k" in answer.reason  # the server answered
        assert aside.process is not None and aside.start_s < 1.0  # the ask did not wait for its start
    finally:
        aside.close()
    assert aside.process is None


@needs_root
def test_a_server_that_fails_to_start_beside_the_worker_says_why_at_the_first_ask(tmp_path: Path) -> None:
    aside = _server(tmp_path, NEEDS_GPU)
    try:
        aside.start_soon()  # its failure happens on the start's own thread
        answer, _ = aside.compile(ASK, time.monotonic() + 120)
        assert not answer.compiled and "imported without a GPU" in answer.reason and aside.process is None
    finally:
        aside.close()
