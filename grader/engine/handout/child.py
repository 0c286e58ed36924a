"""The process `pytest handout` runs one problem's cases in, as `grader grade` runs each problem in a worker.

A kernel that crashes (a segfault under Triton's interpreter, a ctypes call, an abort) or hangs
ends this process, not the student's pytest run: the pytest side (`support.CaseRunner`, through
`isolation`) fails that test with the signal and the student's line, and the problem's next test
gets a fresh process. Here the submission gets what it got in the pytest process before and gets
in the grader's worker: student_runtime's settings, the import policy and the guard (`arm()`)
before its module is imported, once per process. Each request is one case checked, or one
benchmark shape's memory estimated, and gets one `Reply`; before each call a note says what is
being done (the case's label, the call), so that a crash can say where it happened.
"""

from __future__ import annotations

import faulthandler
import os
import threading
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from grader.engine.assignment.load import load_assignment
from grader.engine.handout import errors
from grader.engine.harness import calls, imports, student_runtime, tracebacks
from grader.engine.harness.watch import GUARD, arm, tamper_message
from grader.engine.judge.checks import case_label, check_call, kernel_check
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import case_seed, generator, move_inputs
from grader.engine.problems.memory_estimate import Estimate, estimate
from grader.engine.spec import gpu_limits, versions
from grader.engine.spec.model import Case, Problem

PUBLIC_SECRET = "public"

# the process settings of the grader's worker: here (and so in the pytest process, which imports
# this module for its timing) before any submission module is imported
student_runtime.prepare()


class Failed(Exception):
    """A verdict that fails the test, in the words pytest shows."""


@dataclass
class Reply:
    """One request's answer: `failure` None when the case passed; what the problem replaced of the
    harness so far (its tests fail from then on, as in the grader); a memory request's estimate."""

    failure: str | None = None
    tampered: list[str] = field(default_factory=list)
    estimate: Estimate | None = None
    #: the warnings it raised, for pytest's summary: (message, category, filename, lineno), each
    #: category a builtin one (a submission's own class would not unpickle in the pytest process)
    warnings: list[tuple[str, type[Warning], str, int]] = field(default_factory=list)


def kernel_message(
    spec: Problem, case: Case, profile: dict[str, Any], triton_launches: int, submission: Path | None = None
) -> str | None:
    """The kernel check's verdict on a watched call, as the handout reports it (None: it passes)."""
    ops, compiled = list(profile.get("aten_ops", [])), list(profile.get("compiled_regions", []))
    cheat = kernel_check(
        spec,
        case,
        ops,
        triton_launches,
        compiled,
        submission,
        profile.get("graph_launches", 0),
        profile.get("unwritten"),
    )
    return cheat and f"kernel check: {cheat} (the grader gives 0 for this problem)"


class ProblemCases:
    """One problem's submission module, imported once, and its cases checked as the grader's worker calls them."""

    def __init__(
        self,
        submission: Path,
        problem: str,
        device: str,
        full_trace: bool,
        tampered: list[str],
        note: Callable[[str], None],
    ) -> None:
        self.submission, self.problem, self.device = submission.resolve(), problem, device
        #: pytest's --full-trace: a submission's error is shown whole instead of summed up
        self.full_trace = full_trace
        self.spec, self.kind = load_assignment(hidden=False).problem(problem), REGISTRY[problem]
        #: what the problem replaced of the harness, in this process and in those before it
        self.tampered = list(tampered)
        self.note = note
        self.fresh = calls.FreshInputs()
        self.fn: Callable[..., Any] | None = None
        self.unloadable: BaseException | None = None

    def _note_tampering(self, changed: list[str]) -> None:
        self.tampered += [name for name in changed if name not in self.tampered]

    def function(self, label: str) -> Callable[..., Any]:
        """The submission's function, imported at the first request; an import that failed fails every case."""
        doing = f"importing {self.spec.module}.py:"
        if self.fn is None and self.unloadable is None:
            self.note(f"{label}\n{doing}")
            try:
                self.fn = load_function(self.submission, self.spec.module, self.spec.function)
            except (Exception, SystemExit) as exc:  # noqa: BLE001 - the student's error is a verdict
                self.unloadable = exc
            finally:
                self._note_tampering(GUARD.restore())
        if self.unloadable is not None:
            if isinstance(self.unloadable, imports.RefusedImport):
                raise Failed(str(self.unloadable))  # the grader's message alone
            raise Failed(self._error(label, doing, self.unloadable, None))
        assert self.fn is not None
        return self.fn

    def _error(self, label: str, doing: str, error: BaseException, hint: str | None) -> str:
        if self.full_trace:
            return f"{label}\n{doing}\n" + "".join(traceback.format_exception(error)).rstrip()
        frames, innermost = tracebacks.student_frames(error, self.submission), tracebacks.chain(error)[-1]
        return errors.summary(label, doing, frames, innermost, self.submission, hint)

    def check(self, case: Case) -> None:
        """Every correctness rule of the grader, on this case's public inputs: outputs, inputs and
        the kernel check; the call is made by the grader worker's own `calls.run`."""
        kind, spec, problem = self.kind, self.spec, self.problem
        fn = self.function(case_label(kind, case))
        for repeat in range(case.repeats):
            inputs = kind.make_inputs(case, generator(case_seed(PUBLIC_SECRET, problem, case, repeat)))
            expected = kind.expected(inputs, case)
            label, call = case_label(kind, case, inputs), f"call {repeat + 1} of {case.repeats}:"
            self.note(f"{label}\n{call}")
            GUARD.tampered = []  # this call's own: the worker keeps them per problem, each in its own process
            outcome = calls.run(kind, fn, case, move_inputs(inputs, self.device), self.device, self.fresh, watch=True)
            self._note_tampering(GUARD.tampered)
            if self.tampered:
                raise Failed(f"{label}\n{tamper_message(self.tampered)}")
            if isinstance(outcome.error, NotImplementedError):
                raise Failed(f"NotImplementedError: {outcome.error}")
            if outcome.error is not None:  # the hint as the grader's worker adds it
                raise Failed(self._error(label, call, outcome.error, gpu_limits.hint(str(outcome.error))))
            assert outcome.result is not None
            cheat = kernel_message(spec, case, outcome.profile, outcome.triton_launches, self.submission)
            meta, payload = calls.describe_outputs(outcome.result, outcome.inputs, outcome.snapshots)
            changed = outcome.changed_inputs()
            verdict = check_call(kind, spec, case, self.device, expected, payload, meta, changed, outcome.gpu_compiles)
            failures = [m for m in (verdict.message if not verdict.passed else "", cheat) if m]
            if failures:
                label += " (compile-only: compiled for the GPU, not run)" if case.compile_only else ""
                raise Failed(f"{label}\n{call}\n" + "\n".join(failures))

    def memory(self, case: Case) -> Estimate:
        """The estimated GPU memory of one timed call at benchmark `case` (meta tensors, no GPU);
        what the submission's code replaced meanwhile fails the test as in `check`."""
        fn = self.function(case.name)
        self.note(case.name)
        GUARD.tampered = []
        result = estimate(self.kind, fn, case, self.submission)
        self._note_tampering(GUARD.restore())
        if self.tampered:
            raise Failed(f"{case.name}\n{tamper_message(self.tampered)}")
        return result

    def answer(self, request: str, case: Case) -> Reply:
        reply = Reply()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # pytest's own filters judge them where they are shown again
            try:
                if request == "memory":
                    reply.estimate = self.memory(case)
                else:
                    self.check(case)
            except Failed as exc:
                reply.failure = str(exc)
            except Exception as exc:  # noqa: BLE001 - outside a watched call (the handout's own error): shown whole
                reply.failure = "".join(traceback.format_exception(exc)).rstrip()
        reply.tampered = list(self.tampered)
        reply.warnings = _sent(caught)
        return reply


def _sent(caught: list[warnings.WarningMessage]) -> list[tuple[str, type[Warning], str, int]]:
    """Each distinct warning once, under its nearest builtin category (its own name kept in the text)."""
    sent: list[tuple[str, type[Warning], str, int]] = []
    for w in caught:
        builtin = next(c for c in w.category.__mro__ if c.__module__ == "builtins")
        text = str(w.message) if builtin is w.category else f"{w.category.__name__}: {w.message}"
        entry = (text, builtin, str(w.filename), int(w.lineno))
        if entry not in sent:
            sent.append(entry)
    return sent


#: where faulthandler writes the stack when a signal ends the process (kept open: faulthandler writes to its fd)
_CRASH_LOG: list[TextIO] = []


def serve(
    conn: Connection,
    lifeline: Connection,
    crash_log: str,
    submission: str,
    problem: str,
    device: str,
    full_trace: bool,
    tampered: list[str],
) -> None:
    """The child's loop: (request, case) in, ("at", what is being done) notes and ("done", Reply) out,
    until the pytest side closes its end."""
    _CRASH_LOG.append(open(crash_log, "w", encoding="utf-8"))  # noqa: SIM115 - open for the life of the process
    faulthandler.enable(_CRASH_LOG[0], all_threads=True)  # SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: the stacks
    threading.Thread(target=_end_with, args=(lifeline,), name="handout-lifeline", daemon=True).start()
    imports.install(Path(submission), versions.graded().allowed_imports)
    arm()  # before the submission module is imported, as in the worker
    cases = ProblemCases(Path(submission), problem, device, full_trace, tampered, lambda text: conn.send(("at", text)))
    while True:
        try:
            request, case = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        conn.send(("done", cases.answer(request, case)))


def _end_with(lifeline: Connection) -> None:
    """End this process when the pytest process ends, even mid-call (a hung kernel): nothing is ever
    sent on `lifeline`, and its other end closes with pytest, killed with SIGKILL too. (The
    forkserver a child comes from lives as long as any of its children, so it cannot tell them.)"""
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)
