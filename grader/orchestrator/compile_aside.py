"""Compiles made aside: a kernel's compile runs while the grading does not hold the GPU.

Triton compiles a kernel at its first launch, inside a call that holds the GPU shared: the
seconds of CPU it takes (100 s for a block-pointer FlashAttention on the H200) cannot overlap any
other grading's timed window, and they bound a class's wall (docs/gpu-scheduling.md). With
`GradeOptions.compile_aside`, a worker's compile that misses its cache is asked of the
orchestrator instead (grader/harness/compile_aside.py); the grading stops the worker, lets go of
the GPU, has the problem's compile server compile it (grader/harness/compile_serve.py: the
submission imported in a sandbox whose GPU device files are hidden), takes the GPU again behind
any waiting timer, and hands the files to the worker, which finds them in its Triton cache.

The compile is the student's time, as it was in the worker; the server's start and taking the GPU
again are not. Every failure of the server (no mount namespace to hide the GPU, an import that
needs a GPU, a kernel it cannot find by name, a different cache key) is a refusal, and the worker
compiles the kernel itself, under the hold, as it would without this module.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import threading
import time
from pathlib import Path
from typing import Protocol

from grader import protocol
from grader.orchestrator import trace
from grader.orchestrator.gpu_lease import SharedHold
from grader.orchestrator.problem_clock import ProblemClock
from grader.protocol.compiles import MAX_BYTES, TARGET_ENV
from grader.records.model import Phases
from grader.sandbox.config import SandboxConfig
from grader.sandbox.process import Asked, WorkerDied, WorkerProcess, WorkerTimeout, WorkerUnavailable
from grader.spec.model import Problem

SERVER = "grader.harness.compile_serve"
#: a server's start (imports, the submission's import without a GPU): the grading's time, not the student's
START_LIMIT_S = 120.0


@functools.cache
def graded_target() -> str:
    """The GPU's target and properties as this process's Triton driver sees them, for the compile
    server's imports (`TARGET_ENV`); "" where there is no GPU driver."""
    try:
        import torch
        from triton.runtime import driver

        target = driver.active.get_current_target()
        properties = driver.active.utils.get_device_properties(torch.cuda.current_device())
        seen = {"backend": target.backend, "arch": target.arch, "warp_size": target.warp_size}
        return json.dumps({**seen, "properties": properties})
    except Exception:  # noqa: BLE001 - no GPU, no driver: the server assumes an H200's target
        return ""


def server(on: bool, config: SandboxConfig, submission: Path, problem: Problem) -> CompileServer | None:
    """The problem's compile server (not started yet), if compiles are made aside: only a grader run as
    root can hide the GPU from it (a mount namespace), so elsewhere none is made and workers never ask."""
    return CompileServer(config, submission, problem) if on and os.geteuid() == 0 else None


def refused(reason: str) -> protocol.CompileAnswer:
    return protocol.CompileAnswer(compiled=False, reason=reason[:300])


class CompileServer:
    """One problem's compile server, started at the problem's first ask and kept for the others."""

    def __init__(self, config: SandboxConfig, submission: Path, problem: Problem) -> None:
        extra_env = {**config.extra_env, **({TARGET_ENV: target} if (target := graded_target()) else {})}
        self.config = dataclasses.replace(config, no_gpu=True, gpu_memory_fraction=None, extra_env=extra_env)
        self.submission, self.problem = submission, problem
        self.process: WorkerProcess | None = None
        #: why no compile is made aside for this problem any more (the worker compiles them)
        self.broken: str | None = None
        self.compiled = 0
        self.output = ""
        #: seconds an ask waited for the server's start: the grading's, like a worker's start, not the student's
        self.start_s = 0.0
        self._starting: threading.Thread | None = None

    def start_soon(self) -> None:
        """Start the server now, beside the worker's imports, not at the first ask: for a worker whose
        kernels are cold (no kept cache), which will ask."""
        if self._starting is None and self.process is None and self.broken is None:
            self._starting = threading.Thread(target=self._spawn, args=(self.problem,), daemon=True)
            self._starting.start()

    def _start(self) -> None:
        """The server started (or found broken), in this thread or by `start_soon`'s; the seconds
        this thread waited for it are `start_s`."""
        began = time.monotonic()
        try:
            if self._starting is not None:
                self._starting.join()
                self._starting = None
            elif self.broken is None and self.process is None:
                self._spawn(self.problem)
        finally:
            self.start_s += time.monotonic() - began

    def _spawn(self, p: Problem) -> None:
        with trace.span(p.name, "compile server: start, the GPU not held"):
            try:
                self.process = WorkerProcess(self.config, self.submission, p.name, p.module, p.function, entry=SERVER)
                until = time.monotonic() + START_LIMIT_S
                greeting = self.process.wait_ready(until)
            except (WorkerUnavailable, WorkerDied, WorkerTimeout, OSError) as exc:
                self.broken = f"the compile server could not start: {exc}"
                self._stop_process()
                return
        if not isinstance(greeting, protocol.Ready):
            self.broken = "the submission could not be imported without a GPU"
            self._stop_process()

    def compile(self, ask: protocol.CompileAsk, deadline: float) -> tuple[protocol.CompileAnswer, bytes]:
        """The answer to one ask. WorkerTimeout when the problem's time runs out in the compile."""
        if self.broken is None and (self.process is None or self._starting is not None):
            self._start()
        if self.broken is not None or self.process is None:
            return refused(self.broken or "no compile server"), b""
        try:
            reply, blob = self.process.call(protocol.CompileRequest(ask=ask), b"", deadline, MAX_BYTES * 2)
        except WorkerDied as exc:
            self.broken = f"the compile server died: {exc.reason}"
            self.close()
            return refused(self.broken), b""
        if isinstance(reply, protocol.Compiled):
            self.compiled += 1
            trace.note(reply.seconds, self.problem.name, f"compiled aside: {ask.qualname[:60]}")
            return protocol.CompileAnswer(compiled=True), blob
        assert isinstance(reply, protocol.CompileRefused)
        return refused(reply.reason), b""

    def close(self) -> None:
        if self._starting is not None:
            self._starting.join()
            self._starting = None
        self._stop_process()

    def _stop_process(self) -> None:
        """Stop the server's process (here or in `start_soon`'s thread, which `close` waits for)."""
        if self.process is not None:
            self.process.close()
            self.output = self.output or self.process.output()
            self.process = None


class _Run(Protocol):
    """What `asked_by` needs of a ProblemRun (grader/orchestrator/problem_run.py)."""

    aside: CompileServer | None
    hold: SharedHold | None
    clock: ProblemClock
    phases: Phases

    @property
    def deadline(self) -> float: ...

    def pause(self) -> None: ...
    def _resume(self) -> None: ...
    def _waited(self, seconds: float) -> None: ...


def _in_the_window(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes, float]:
    return refused("the GPU is held alone (a timed window is not let go of midway)"), b"", 0.0


def asked_by(run: _Run) -> Asked | None:
    """What answers the run's worker's asks: made aside while the call holds the GPU shared,
    refused while the GPU is held alone; None when compiles are not made aside (the worker was not
    told to ask, and an ask breaks the protocol)."""
    if run.aside is None:
        return None
    if run.hold is None:
        return _in_the_window
    aside, hold = run.aside, run.hold

    def answer(ask: protocol.CompileAsk) -> tuple[protocol.CompileAnswer, bytes, float]:
        if aside.broken is not None:  # no server: refused at once, the GPU kept
            return refused(aside.broken), b"", 0.0
        run.pause()  # nothing of the worker runs while the GPU is not held
        hold.let_go()
        let_go, starts = time.monotonic(), aside.start_s
        try:
            reply, blob = aside.compile(ask, run.deadline)
        finally:
            run.phases.compile_aside_s += time.monotonic() - let_go
            started = aside.start_s - starts
            run.clock.excuse(started)  # the server's start is the machine's time, as a worker's is
            with trace.span(aside.problem.name, "the GPU taken again after a compile aside"):
                waited = hold.take_again()
            hold.since = time.monotonic()
            run._waited(waited)
            run._resume()
        return reply, blob, waited + started

    return answer
