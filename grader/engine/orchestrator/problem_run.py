"""One problem of one submission: its workers, its correctness cases, then its timing."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

import torch

from grader.engine import kernel_cache, protocol
from grader.engine.judge import performance, round_checks
from grader.engine.judge.checks import case_label, check_call, device_note, profiled_kernel_check
from grader.engine.orchestrator import gpu_lease, trace
from grader.engine.orchestrator.options import GradeOptions
from grader.engine.orchestrator.problem_clock import ProblemClock
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import case_seed, generator
from grader.engine.records.model import Contention, Performance, Phases, ShapeProfile, ShapeTiming, TestResult
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.kernel_copy import HeldCache
from grader.engine.sandbox.process import Waiting, WorkerDied, WorkerProcess, WorkerTimeout, WorkerUnavailable
from grader.engine.spec.model import Case, Problem

MAX_RESTARTS = 2
IMPORTS_LIMIT_S = 120.0  # a worker's imports: the grader's start-up, not the problem's time


class ProblemRun:
    """Grades one problem: runs its cases in a worker, restarting it after a crash."""

    def __init__(
        self,
        problem: Problem,
        submission: Path,
        device: str,
        options: GradeOptions,
        config: SandboxConfig,
        sha256: str = "",
    ) -> None:
        self.problem, self.sha256 = problem, sha256
        self.kernel_slot = (
            kernel_cache.slot(options.kernel_cache, sha256, problem.name) if options.kernel_cache and sha256 else None
        )
        self.kind = REGISTRY[problem.name]
        self.submission, self.device, self.options, self.config = submission, device, options, config
        self.limit = options.timeout or problem.time_limit_s
        #: the problem's own time: charged only while its worker runs its requests
        self.clock = ProblemClock(self.limit)
        self.worker: WorkerProcess | None = None
        self.held_kernels: HeldCache | None = None  # the timed worker's cache, until copied
        self.restarts = 0
        self.output: list[str] = []
        self.cheat: str | None = None
        #: GPU work of a watched call launched outside every Triton launch and op: for staff (checks.device_note)
        self.device_note: str | None = None
        self.fatal: str | None = None
        #: why the benchmark shapes' first calls (warm()) failed: the problem is then not timed
        self.unwarmed: str | None = None
        self.contended: Contention | None = None  # the record's field: may be other gradings' doing
        #: why part of the problem could not be graded on this machine (the record's `ungradable`)
        self.ungradable: str | None = None
        #: each benchmark shape's measured peak beyond its inputs, in bytes (budgets.note_peak)
        self.peaks: dict[str, int] = {}
        self.isolation = ""
        self.spawned_at = self.started = self.checked_at = 0.0
        self.cases: list[Case] = problem.suite_cases("gpu" if device == "cuda" else "cpu")  # this device's suite
        #: the GPU's lease: correctness calls shared with other gradings, timed windows alone
        self.lease = gpu_lease.for_device(device)
        self.phases = Phases()
        self.waited = 0.0  # waiting for other problems' timing: not part of the problem's duration
        self.measured_at = 0.0
        #: what `measure` left for `finish`: why nothing was timed, or the shapes still to score
        self.timed: Performance | list[ShapeTiming] = Performance(
            status="skipped", reason="not timed", max_score=problem.points.performance
        )
        self.checks: list[round_checks.ShapeChecks] = []
        self.profiled: list[ShapeProfile] = []
        self.gpu_name = ""

    def fresh(self) -> ProblemRun:
        """A new run of the same problem, submission and options, nothing of this one's state."""
        return ProblemRun(self.problem, self.submission, self.device, self.options, self.config, self.sha256)

    @contextmanager
    def gpu_hold(self) -> Iterator[Waiting]:
        """Hold the GPU's lease (nothing on the CPU); the wait is this problem's `gpu_wait_s`. Yields
        what the call's waits for its worker ask: whether to step aside for a timer, and how long the
        worker waited for a CPU others held (`ProblemClock.starved`)."""
        if self.lease is None:
            yield self.clock.starved
            return
        asked = time.monotonic()
        with self.lease.shared() as hold:
            self._waited(time.monotonic() - asked)
            step_aside = hold.waiting(self.pause, self._resume, self._waited)
            yield lambda: step_aside() + self.clock.starved()

    @property
    def deadline(self) -> float:
        """When the request being charged to the problem must end (`ProblemClock.deadline`)."""
        return self.clock.deadline

    def _waited(self, seconds: float) -> None:
        """Waiting for other gradings' timing is not this problem's time."""
        self.phases.gpu_wait_s += seconds
        self.clock.excuse(seconds)

    # -- worker lifecycle ------------------------------------------------------------------------

    def spawn(self) -> None:
        """Start the worker, not waiting: its imports run beside the grader's start and the other problems'."""
        if self.worker is None:
            self.spawned_at, p = time.monotonic(), self.problem
            args = (self.config, self.submission, p.name, p.module, p.function, self.kernel_slot)
            self.worker = WorkerProcess(*args)
            self.clock.pid = self.worker.proc.pid if self.worker.proc is not None else None
            self.isolation = self.worker.isolation

    def _begin_worker(self) -> None:
        """Wait for the worker's imports (spawning it if need be), holding nothing: no CUDA context,
        none of the submission. Not the problem's time: a loaded machine's, and bounded from when
        this wait begins (a worker spawned at the grading's start may have waited for earlier
        problems long past its own imports)."""
        if self.worker is not None and self.worker.imported:
            return
        started = time.monotonic()
        try:
            self.spawn()
            assert self.worker is not None
            self.worker.wait_imported(max(self.spawned_at, started) + IMPORTS_LIMIT_S)
        except WorkerTimeout:
            self.stop_worker()
            raise WorkerUnavailable(
                f"the worker's start-up imports (Python, PyTorch, Triton; none of the submission) took more "
                f"than {IMPORTS_LIMIT_S:g} s: the grading machine is overloaded"
            ) from None
        finally:
            self.phases.worker_start_s += time.monotonic() - started

    def start_worker(self, waiting: Waiting | None = None) -> None:
        """The worker's start past its imports (the GPU held, on a GPU): the submission imported."""
        self._begin_worker()
        assert self.worker is not None
        started, waited = time.monotonic(), self.phases.gpu_wait_s
        try:
            with self.clock.charging("worker start (the submission imported)"):
                waits = waiting or self.clock.starved
                greeting = self.worker.wait_ready(self.deadline, waits)
        finally:  # a step aside for a timer meanwhile is the GPU's wait, not the worker's start
            self.phases.worker_start_s += time.monotonic() - started - (self.phases.gpu_wait_s - waited)
        if isinstance(greeting, protocol.Ready):
            for step, seconds in list(greeting.start_s.items())[:8]:
                trace.note(seconds, self.problem.name, f"worker start: {step[:60]}")
        if isinstance(greeting, protocol.ImportFailed):
            self.stop_worker()
            self.fatal = f"could not load {self.problem.module}.{self.problem.function}: {greeting.message}"
            tb = greeting.traceback
            if tb and tb.strip() not in self.fatal:
                self.fatal += f"\n{tb}"

    def close(self) -> None:
        """Stop this problem's worker, whatever state the grading is in (grade()'s `finally`)."""
        self.stop_worker()
        if self.held_kernels is not None:  # never copied: let go of it (release is once only)
            self.held_kernels.release()

    def stop_worker(self, keep_kernels: bool = False) -> None:
        if self.worker is not None:
            held = self.worker.close(keep_cache=keep_kernels and self.kernel_slot is not None)
            self.held_kernels = held or self.held_kernels  # one timed worker per problem: one held
            text = self.worker.output()
            if text:
                self.output.append(text)
            self.worker = None
            self.clock.pid = None

    @cached_property
    def reference(self) -> Callable[..., Any]:
        """The staff reference's function, loaded once: the call primed before the window
        (first_calls.prime_reference) and the timed ones share its kernels (a new load is a new module)."""
        return performance.load_reference(self.problem, self.options.reference_dir)

    def note_failure(self, reply: protocol.Failed) -> None:
        """A call's failure: a fatal one ends the worker; out of memory beside others is contention."""
        if reply.type == "OutOfMemoryError" and self.lease is not None:
            self.contended = "out_of_memory"
        if reply.fatal:
            self.stop_worker()

    # -- one call ---------------------------------------------------------------------------------

    def _call(self, case: Case, repeat: int) -> tuple[bool, str]:
        """(passed, message) for one call with fresh inputs, holding the GPU beside other gradings' calls
        (a new worker's imports come before the hold: no GPU work, nothing of the submission)."""
        if self.worker is None or not self.worker.imported:
            with trace.span(self.problem.name, "worker start: imports, the GPU not held"):
                self._begin_worker()
        seed = case_seed(self.options.secret, self.problem.name, case, repeat)
        with trace.span(self.problem.name, case.name, repeat, "inputs"):
            inputs = self.kind.make_inputs(case, generator(seed))  # on the CPU: no hold needed
        with self.gpu_hold() as waiting:
            try:
                return self._held_call(case, repeat, inputs, waiting)
            finally:
                if self.lease is not None:
                    self.pause()  # a worker runs only while its grading holds the GPU

    def _held_call(self, case: Case, repeat: int, inputs: dict[str, Any], waiting: Waiting | None) -> tuple[bool, str]:
        label = (self.problem.name, case.name, repeat)
        with trace.span(*label, "expected"):
            try:
                on_device = {k: v.to(self.device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
                expected = self.kind.expected(on_device, case)
            except torch.OutOfMemoryError:
                # a worker may be holding the GPU's memory: the float64 definition also runs on the CPU
                torch.cuda.empty_cache()
                expected = self.kind.expected(inputs, case)
        max_blob = sum(t.numel() * 8 for t in expected.values()) + (1 << 20)
        if self.worker is None or not self.worker.ready:
            with trace.span(self.problem.name, "worker start"):
                self.start_worker(waiting)
            if self.fatal:
                return False, self.fatal
        assert self.worker is not None
        request = protocol.CallRequest(case=case.model_dump(), profile=True)
        with trace.span(*label, "worker round trip"):
            inputs_blob = protocol.pack_tensors(inputs)
            with self.clock.charging(f"case {case.name}"):
                reply, blob = self.worker.call(request, inputs_blob, self.deadline, max_blob, waiting)
        if isinstance(reply, protocol.Failed):
            self.note_failure(reply)
            return False, f"{reply.message}\n{reply.traceback}".strip()
        assert isinstance(reply, protocol.Called)  # the only other reply a call may get
        trace.note(reply.call_s, *label, "in the worker: the call, profiled")
        payload = protocol.unpack_tensors(blob)
        if not isinstance(payload, dict):
            raise protocol.ProtocolError("the reply's payload is not a mapping of outputs")
        launches = reply.triton_launches
        self.cheat = self.cheat or profiled_kernel_check(self.problem, case, reply.profile, launches, self.submission)
        if reply.profile is not None and self.device_note is None:
            self.device_note = device_note(case, reply.profile.foreign_work)
        with trace.span(*label, "check"):
            verdict = check_call(
                self.kind,
                self.problem,
                case,
                self.device,
                expected,
                payload,
                reply.meta,
                reply.inputs_changed,
                reply.gpu_compiles,
            )
        return verdict.passed, verdict.message

    # -- the problem ------------------------------------------------------------------------------

    def pause(self) -> None:
        """Stop this problem's worker (if any) while something else is timed on the GPU."""
        if self.worker is not None:
            self.worker.pause()

    def _resume(self) -> None:
        if self.worker is not None:
            self.worker.resume()

    def check(self) -> list[TestResult]:
        """The correctness half: every case of the problem's suite, in this problem's worker."""
        self.started = time.monotonic()
        cases = self.cases
        tests: list[TestResult] = []
        stop_reason: str | None = None
        for case in cases:
            test_start = time.monotonic()
            label = case_label(self.kind, case)
            status, message = "passed", ""
            if stop_reason:
                status, message = "error", f"not run: {stop_reason}"
            else:
                for repeat in range(case.repeats):
                    try:
                        passed, text = self._call(case, repeat)
                    except WorkerTimeout:
                        stop_reason = self.clock.ran_out(f"during case {case.name}")
                        status, message = "error", stop_reason
                        self.stop_worker()
                        break
                    except (WorkerDied, protocol.ProtocolError) as exc:
                        self.restarts += 1
                        self.stop_worker()
                        died = isinstance(exc, WorkerDied)  # its str is its reason
                        message = f"{exc} during case {case.name}" if died else f"the worker sent malformed data: {exc}"
                        status, broke = "error", "crashed" if died else "broke the protocol or crashed"
                        if self.restarts > MAX_RESTARTS:
                            stop_reason = f"the worker {broke} {self.restarts} times"
                        break
                    if self.fatal:
                        stop_reason = "the submission could not be loaded"
                        status, message = "error", self.fatal
                        break
                    if not passed:
                        status, message = "failed", f"call {repeat + 1} of {case.repeats}: {text}"
                        break
                if self.cheat and not stop_reason:  # the problem scores 0 whatever the other cases give
                    stop_reason = f"the kernel rule was broken in case {case.name}, so the problem scores 0"
            tests.append(
                TestResult(
                    name=f"{self.problem.name}: {case.name}",
                    status=status,  # type: ignore[arg-type]
                    score=0.0,
                    max_score=0.0,
                    message=message,
                    visibility=case.visibility,
                    case=label,
                    duration_s=round(time.monotonic() - test_start, 3),
                )
            )
            if self.options.progress:
                self.options.progress(f"{self.problem.name} {len(tests)}/{len(self.cases)}: {case.name} {status}")
        self.checked_at = time.monotonic()
        self.phases.correctness_s = self.checked_at - self.started
        return tests

    # -- performance ------------------------------------------------------------------------------

    def clean(self, tests: list[TestResult]) -> bool:
        return not (self.cheat or self.fatal) and bool(tests) and all(t.status == "passed" for t in tests)

    def will_time(self, tests: list[TestResult]) -> bool:
        """Whether the performance half will time or profile anything (grade() takes the GPU alone for it)."""
        wanted = self.options.time_performance or self.options.profile
        timed_here = self.device == "cuda" and wanted and bool(self.problem.benchmarks)
        return timed_here and self.clean(tests) and self.unwarmed is None
