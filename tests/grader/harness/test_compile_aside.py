"""A compile made aside, on a CPU: Triton compiles for the H200's target (sm_90) without a GPU, so
the whole round trip runs here with real processes: this process plays the worker (Triton's JIT
told of an sm_90 target by the compile server's own `TargetOnly` driver), a real compile server
is spawned in its sandbox, and what it hands back must be what Triton's cache here then loads.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

from grader import protocol
from grader.harness import compile_aside, compile_serve
from grader.loading import load_file
from grader.sandbox.config import SandboxConfig
from grader.sandbox.plan import gpu_device_files
from grader.sandbox.process import WorkerProcess

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a compile server hides the GPU in a mount namespace (root)")

KERNELS = """
import triton
import triton.language as tl


@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr, DT: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(out + i, (tl.load(x + i, mask=m) + tl.load(y + i, mask=m)).to(DT), mask=m)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}), triton.Config({"BLOCK": 256})], key=["n"])
@triton.jit
def tuned(x, out, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + i, tl.load(x + i, mask=i < n) * 2, mask=i < n)


def local_kernel():
    @triton.jit
    def inner(x, BLOCK: tl.constexpr):
        tl.store(x + tl.arange(0, BLOCK), tl.arange(0, BLOCK).to(tl.float32))

    return inner


def solve(x):
    return x
"""


def _spawn(config: SandboxConfig, submission: Path) -> WorkerProcess:
    return WorkerProcess(config, submission, "gelu", "kernels", "solve", entry="grader.harness.compile_serve")


def _server(submission: Path) -> WorkerProcess:
    server = _spawn(SandboxConfig(device="cuda", no_gpu=True, gpu_memory_fraction=None), submission)
    greeting = server.wait_ready(time.monotonic() + 120)
    assert isinstance(greeting, protocol.Ready), server.output()
    return server


@pytest.fixture
def submission(tmp_path: Path) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "kernels.py").write_text(KERNELS)
    return folder


@pytest.fixture
def as_worker(submission: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """This process as a worker on an sm_90 target, its own Triton cache, the submission imported."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "worker-cache"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the tests' default: kernels as on a GPU here
    before = driver._active
    driver.set_active(compile_serve.TargetOnly(GPUTarget("cuda", 90, 32)))  # type: ignore[arg-type]
    monkeypatch.syspath_prepend(str(submission))
    module = load_file(submission / "kernels.py", "kernels")
    try:
        yield module
    finally:
        compile_aside.uninstall()
        driver._active = before
        sys.modules.pop("kernels", None)


def _hits(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each compile from now on found its kernel in the cache (Triton's own listener)."""
    seen: list[bool] = []
    monkeypatch.setattr(triton.knobs.compilation, "listener", lambda **kw: seen.append(kw["cache_hit"]))
    return seen


@needs_root
def test_a_kernel_compiled_aside_is_what_the_workers_cache_then_loads(
    submission: Path, as_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = _server(submission)
    answers: list[protocol.CompileAnswer] = []

    def channel(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes]:
        reply, blob = server.call(protocol.CompileRequest(ask=ask), b"", time.monotonic() + 120, 1 << 28)
        answer = protocol.CompileAnswer(compiled=isinstance(reply, protocol.Compiled), reason=str(reply)[:200])
        answers.append(answer)
        return answer, blob

    try:
        compile_aside.install(channel)
        hits = _hits(monkeypatch)
        x, y, out = torch.randn(1000), torch.randn(1000), torch.empty(1000)
        kernel = as_worker.add.warmup(x, y, out, 1000, BLOCK=128, DT=tl.float32, grid=(1,))
        assert [a.compiled for a in answers] == [True], answers
        assert hits == [True]  # Triton's compile here found the server's files under its own key
        assert "cubin" in kernel.asm and kernel.metadata.name == "add"
        as_worker.add.warmup(x, y, out, 1000, BLOCK=128, DT=tl.float32, grid=(1,))
        assert len(answers) == 1  # the same specialization: Triton's memory, no ask
        as_worker.add.warmup(x, y, out, 1000, BLOCK=256, DT=tl.bfloat16, grid=(1,))
        assert [a.compiled for a in answers] == [True, True] and hits == [True, True]
        # an autotuned kernel is found through its wrapper; a kernel made inside a function is not
        # asked for (the server could not find it by name): Triton compiles it here
        as_worker.tuned.fn.warmup(x, out, 1000, BLOCK=64, grid=(1,))
        as_worker.local_kernel().warmup(out, BLOCK=32, grid=(1,))
        assert [a.compiled for a in answers] == [True, True, True] and hits == [True, True, True, False]
    finally:
        server.close()


@needs_root
def test_the_server_refuses_what_it_would_not_compile_identically(submission: Path, as_worker: Any) -> None:
    asks: list[protocol.CompileAsk] = []

    def keep(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes]:
        asks.append(ask)
        return protocol.CompileAnswer(compiled=False, reason="kept for the test"), b""

    compile_aside.install(keep)
    x = torch.randn(64)
    as_worker.add.warmup(x, x, x, 64, BLOCK=64, DT=tl.float32, grid=(1,))  # refused: compiled here
    (ask,) = asks
    server = _server(submission)
    try:
        for changed, why in [
            ({"fn_key": "0" * 64}, "source or dependencies differ"),
            ({"key": "0" * 64}, "cache key differs"),
            ({"qualname": "solve"}, "no kernel kernels.solve"),
            ({"line": ask.line + 1}, "no kernel"),
            ({"spec": "[1, 2]"}, "could not be read"),
        ]:
            reply, _ = server.call(
                protocol.CompileRequest(ask=ask.model_copy(update=changed)), b"", time.monotonic() + 60, 1 << 28
            )
            assert isinstance(reply, protocol.CompileRefused) and why in reply.reason, (changed, reply)
        reply, blob = server.call(protocol.CompileRequest(ask=ask), b"", time.monotonic() + 60, 1 << 28)
        assert isinstance(reply, protocol.Compiled) and "add.cubin" in reply.files and blob
    finally:
        server.close()


@needs_root
def test_the_compile_server_cannot_open_the_gpus_device_files(tmp_path: Path) -> None:
    """A file named like an NVIDIA device stands in for /dev/nvidia0 (this machine has none)."""
    device = Path("/dev/nvidia-grader-test")
    device.write_text("the GPU")
    device.chmod(0o666)
    try:
        assert device in gpu_device_files()
        folder = tmp_path / "sub"
        folder.mkdir()
        (folder / "kernels.py").write_text(f"open({str(device)!r}).read()\n\ndef solve(x):\n    return x\n")
        seeing = WorkerProcess(
            SandboxConfig(device="cuda", gpu_memory_fraction=None),
            folder,
            "gelu",
            "kernels",
            "solve",
            entry="grader.harness.compile_serve",
        )
        try:
            assert isinstance(seeing.wait_ready(time.monotonic() + 120), protocol.Ready)  # a worker sees the GPU
        finally:
            seeing.close()
        blind = WorkerProcess(
            SandboxConfig(device="cuda", no_gpu=True, gpu_memory_fraction=None),
            folder,
            "gelu",
            "kernels",
            "solve",
            entry="grader.harness.compile_serve",
        )
        try:
            greeting = blind.wait_ready(time.monotonic() + 120)
            assert isinstance(greeting, protocol.ImportFailed) and "Permission" in greeting.type + greeting.message
        finally:
            blind.close()
    finally:
        device.unlink()


def test_without_a_mount_namespace_no_compile_server_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.sandbox import plan

    monkeypatch.setattr(plan.os, "geteuid", lambda: 1000)
    with pytest.raises(OSError, match="mount namespace"):
        plan.plan_isolation(SandboxConfig(device="cuda", no_gpu=True))


def test_only_the_submissions_own_kernels_are_asked_for(submission: Path, as_worker: Any, tmp_path: Path) -> None:
    asks: list[protocol.CompileAsk] = []

    def keep(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes]:
        asks.append(ask)
        return protocol.CompileAnswer(compiled=False, reason="kept for the test"), b""

    x = torch.randn(64)
    compile_aside.install(keep, root=tmp_path / "another-folder")  # Inductor's generated kernels, a library's
    as_worker.add.warmup(x, x, x, 64, BLOCK=64, DT=tl.float32, grid=(1,))
    compile_aside.install(keep, root=submission)
    as_worker.add.warmup(x, x, x, 64, BLOCK=32, DT=tl.float32, grid=(1,))
    assert [a.qualname for a in asks] == ["add"] and '"BLOCK"' in asks[0].spec and "[[4], 32]" in asks[0].spec


TUTORIAL_IMPORT = """
import triton
from triton.runtime import driver

DEVICE = driver.active.get_active_torch_device()
NUM_SM = driver.active.utils.get_device_properties(DEVICE.index or 0)["multiprocessor_count"]
print("SMs", NUM_SM, flush=True)


def solve(x):
    return x
"""


@needs_root
@pytest.mark.parametrize("told", [True, False], ids=["the-gpus-properties-given", "none-given"])
def test_a_tutorial_style_import_reads_the_graded_gpus_properties(tmp_path: Path, told: bool) -> None:
    """Triton's tutorials read the SM count at import; the server answers with the graded GPU's."""
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "kernels.py").write_text(TUTORIAL_IMPORT)
    seen = {"backend": "cuda", "arch": 90, "warp_size": 32, "properties": {"multiprocessor_count": 132}}
    env = {protocol.TARGET_ENV: json.dumps(seen)} if told else {}
    server = _spawn(SandboxConfig(device="cuda", no_gpu=True, gpu_memory_fraction=None, extra_env=env), folder)
    try:
        greeting = server.wait_ready(time.monotonic() + 120)
    finally:
        server.close()
    if told:
        assert isinstance(greeting, protocol.Ready) and "SMs 132" in server.output()
    else:
        assert isinstance(greeting, protocol.ImportFailed) and "properties are unknown" in greeting.message
