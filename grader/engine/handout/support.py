"""What the public handout tests run: the grader's own cases, inputs and checks, each problem in a
process of its own (`CaseRunner`; timing alone runs in the pytest process, on a GPU).

A student's `pytest handout` uses the same input generator, the same float64 definitions and the
same checks as the grader, so a test that passes locally passes the same public case when graded
(the graded inputs are drawn with a secret seed, so they differ in values, never in kind).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine import timing
from grader.engine.assignment.load import load_assignment
from grader.engine.handout import child, errors
from grader.engine.handout.child import PUBLIC_SECRET, Reply, kernel_message
from grader.engine.handout.isolation import Ended, ProblemProcess
from grader.engine.harness import calls, timed_watch
from grader.engine.harness.timed_rounds import FreshRounds
from grader.engine.harness.watch import GUARD, arm, tamper_message
from grader.engine.judge.performance import ShapeSeeds, watched_flags
from grader.engine.judge.roofline import achieved as _achieved
from grader.engine.judge.round_checks import verify_rounds
from grader.engine.judge.windows import watch_round
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import generator
from grader.engine.problems.memory_estimate import Estimate, gib
from grader.engine.spec.model import Case, Problem


def cases_for(problem: str, suite: str, dtype: str | None, has_gpu: bool = True) -> list[Any]:
    """pytest params for the public cases of `problem` in `suite` ("gpu", "cpu", "benchmark" or "memory")."""
    spec = load_assignment(hidden=False).problem(problem)
    if suite == "memory":  # the benchmark shapes, estimated on meta tensors: no GPU needed
        cases = list(spec.benchmarks)
    elif suite == "benchmark":
        if not has_gpu:
            return [pytest.param(None, marks=pytest.mark.skip(reason="benchmarks need a CUDA GPU"), id="no-gpu")]
        cases = list(spec.benchmarks)
    else:
        cases = spec.suite_cases(suite, "public")
    if dtype:
        cases = [c for c in cases if getattr(c, "dtype", None) == dtype]
    if not cases:
        if suite == "cpu" and dtype == "bfloat16" and REGISTRY[problem].uses_dot:
            reason = (
                "bfloat16 is not tested on CPU for this problem: Triton's interpreter computes tl.dot on "
                "bfloat16 operands wrongly (it multiplies the raw bit patterns, an upstream limitation), so "
                "a correct kernel would look wrong. Use float16/float32 on CPU; bfloat16 is tested on a GPU."
            )
        else:
            reason = f"no public {suite} cases for {problem}" + (f" with dtype {dtype}" if dtype else "")
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="none")]
    return [pytest.param(c, id=case_id(c)) for c in cases]


def case_id(case: Case) -> str:
    """A case's test id; a compile-only case says so, as the grader's reports do."""
    return f"{case.name}-compile-only" if case.compile_only else case.name


class CaseRunner:
    """Checks cases against the float64 definitions, each problem in a process of its own.

    As `grader grade` runs each problem in a worker, each problem's cases run in a child process
    (grader/engine/handout/child.py, started by grader/engine/handout/isolation.py), which imports the submission
    module once and is reused across that problem's cases: a kernel that crashes or hangs fails the
    test it was running, with the signal and the student's line, and the run goes on to its
    summary; the problem's next test gets a fresh process. Timing alone (`BenchmarkRunner`, on a
    GPU) runs in the pytest process: `function` imports the submission here, only then.
    """

    def __init__(
        self, submission: Path, device: str, full_trace: bool = False, time_limit_s: float | None = None
    ) -> None:
        self.submission = submission.resolve()
        self.device = device
        #: pytest's --full-trace: a submission's error is shown whole instead of summed up
        self.full_trace = full_trace
        #: how long one request may take; None: the problem's time limit in the grader (spec)
        self.time_limit_s = time_limit_s
        self.spec = load_assignment(hidden=False)
        self._functions: dict[str, Callable[..., Any]] = {}
        self._armed = False
        #: each problem's child process, while it lives
        self.processes: dict[str, ProblemProcess] = {}
        #: what each problem's module replaced of the harness, at import or in a call (as the
        #: worker's guard reports it: that problem fails, the others are not touched)
        self.tampered: dict[str, list[str]] = {}

    def _module_file(self, problem: str) -> Problem:
        p = self.spec.problem(problem)
        if not (self.submission / f"{p.module}.py").is_file():
            pytest.fail(f"{self.submission} has no {p.module}.py", pytrace=False)
        return p

    def function(self, problem: str) -> Callable[..., Any]:
        """The submission's function imported into this process, for timing on a GPU alone: a crash
        here, unlike in `check`, ends the pytest run."""
        if problem not in self._functions:
            p = self._module_file(problem)
            if not self._armed:
                arm()  # before any submission module is imported here, as in the worker
                self._armed = True
            try:
                self._functions[problem] = load_function(self.submission, p.module, p.function)
            finally:
                self._note_tampering(problem, GUARD.restore())
        return self._functions[problem]

    def _note_tampering(self, problem: str, changed: list[str]) -> None:
        seen = self.tampered.setdefault(problem, [])
        seen += [name for name in changed if name not in seen]

    def tampering(self, problem: str) -> str | None:
        """The grader's tampering message for `problem`, if its code replaced what the checks rely on."""
        names = self.tampered.get(problem)
        return tamper_message(names) if names else None

    def _ask(self, problem: str, request: str, case: Case) -> Reply:
        """`problem`'s child's answer (a fresh child if it has none); a failure fails the test."""
        limit = self.time_limit_s or self._module_file(problem).time_limit_s
        process = self.processes.get(problem)
        if process is None or not process.alive:
            if process is not None:
                process.close()
            known = list(self.tampered.get(problem, []))  # a fresh child still fails a tampering problem
            args = (str(self.submission), problem, self.device, self.full_trace, known)
            process = self.processes[problem] = ProblemProcess(problem, self.submission, child.serve, args)
        answer = process.ask((request, case), limit)
        if isinstance(answer, Ended):
            self.processes.pop(problem).close()
            message = errors.ended(problem, answer.doing, answer.code, answer.frames, limit, self.submission)
            pytest.fail(message, pytrace=False)
        self._note_tampering(problem, answer.tampered)
        for text, category, filename, lineno in answer.warnings:  # into pytest's warnings summary
            warnings.warn_explicit(text, category, filename, lineno)
        if answer.failure is not None:
            pytest.fail(answer.failure, pytrace=False)
        return answer

    def check(self, problem: str, case: Case) -> None:
        """Every correctness rule of the grader, on this case's public inputs: outputs, inputs and
        the kernel check, in `problem`'s child (`child.ProblemCases.check`)."""
        self._ask(problem, "check", case)

    def memory(self, problem: str, case: Case) -> Estimate:
        """The estimated GPU memory of one timed call at benchmark `case` (meta tensors, no GPU), in
        `problem`'s child; what the submission's code replaced meanwhile fails the test as in `check`."""
        result = self._ask(problem, "memory", case).estimate
        assert result is not None
        return result

    def close(self) -> None:
        """End every child (at the end of the session, and on Ctrl-C)."""
        for process in self.processes.values():
            process.close()
        self.processes.clear()


def memory_verdict(result: Estimate) -> None:
    """Fail over the budget; the stub fails as the other tests do; skip what could not be estimated."""
    if result.not_implemented:
        pytest.fail(result.note, pytrace=False)
    if result.peak_bytes is None:
        pytest.skip(result.summary())
    if not result.fits:
        pytest.fail(
            f"{result.summary()}: over by {gib(result.peak_bytes - result.budget_bytes)}. The grader measures this "
            "on the GPU, and a shape over its budget earns no performance points on any card.\n"
            f"{result.hint}",
            pytrace=False,
        )


# As much timed work as the grader puts on each side of a shape (6 alternations of >= 50 ms): ten
# rounds of a steady kernel were once enough for the round planner, and medians of ten rounds
# on a GPU still ramping its clocks came out up to 20% off the graded ones.
TIMED_S = 0.3


class SampleReplay:
    """pytest-benchmark's timer for the handout: hands back the round times the grader's loop measured.

    pytest-benchmark reads its timer before and after each round and keeps the difference. A
    CUDA clock read there must wait for every round before the next is queued, so the GPU idles
    between rounds, and on the H200 that read up to 15% slow on some shapes and 3% fast on
    others (benchmarks/handout_method.py, docs/performance.md). So the rounds are timed first,
    exactly as the grader times them, and this timer replays them: a round starts at 0 and ends
    at its measured time. pytest-benchmark keeps the statistics, the table, --benchmark-save and
    --benchmark-compare.
    """

    def __init__(self) -> None:
        self.stamps: list[float] = []

    def load(self, samples_s: list[float]) -> None:
        stamps = []
        for sample in samples_s:
            stamps += [0.0, sample]
        self.stamps = stamps[::-1]  # popped from the end

    @property
    def spent(self) -> bool:
        return not self.stamps

    def __call__(self) -> float:
        if not self.stamps:
            raise RuntimeError(
                "the handout's benchmark timer was read with no measured rounds left: "
                "time through BenchmarkRunner.run (pytest handout --benchmark-only)"
            )
        return self.stamps.pop()


class BenchmarkRunner:
    """One handout benchmark through pytest-benchmark, with the grader's timing method.

    Same clock (CUDA events), same L2 flush and input rotation before every round, same pilot,
    planned rounds and launch cover (`timing.measure`), so the median printed here predicts the
    graded one; pytest-benchmark gets the measured rounds through `REPLAY`, its timer.
    """

    def __init__(self, runner: CaseRunner, problem: str) -> None:
        self.runner, self.problem = runner, problem

    def run(self, benchmark: Any, case: Case, impl: str) -> None:
        kind, spec = REGISTRY[self.problem], self.runner.spec.problem(self.problem)
        fn = self.runner.function(self.problem) if impl == "yours" else None
        seeds = ShapeSeeds.draw(PUBLIC_SECRET, self.problem, case)
        sets = [kind.make_inputs(case, generator(seeds.inputs + i, "cuda")) for i in range(2)]
        timed = [kind.timed(fn, s) if fn is not None else kind.pytorch(s) for s in sets]
        if benchmark.disabled:  # --benchmark-disable: run once, as a smoke test, time nothing
            timed[0]()
            torch.cuda.synchronize()
            return
        # yours, as the grader times a submission: one watched call for the kernel check, then
        # rounds with new contents and a sample of them checked; PyTorch's rounds as the grader's
        rounds = FreshRounds(kind, case, sets, seeds.refill, seeds.verify) if fn is not None else None
        if fn is not None:
            _, profile, launches = calls.watched(kind, fn, sets[0], case, "cuda")
            cheat = kernel_message(spec, case, profile, launches, self.runner.submission)
            if cheat:
                pytest.fail(cheat, pytrace=False)
        # and, as in a graded window, a chunk of rounds run again under the profiler
        watch = None
        if fn is not None:
            at = watch_round({"seed": seeds.inputs, "verify_seed": seeds.verify}, 1, 2 * timing.PILOT_ROUNDS)
            watched_fn = timed_watch.ranged(fn)
            watch = timed_watch.ChunkProfiler([kind.timed(watched_fn, s) for s in sets], at, rounds)
        measured = timing.measure(timed, budget_s=1.0, min_s=TIMED_S, hooks=rounds, watch=watch)
        samples = measured.samples_s
        if rounds is not None and watch is not None:
            verified, payload = rounds.drain()
            flags = watched_flags(spec, case, watch.watched) + verify_rounds(
                kind,
                spec,
                case,
                seeds,
                0,
                measured.rounds_run,
                verified,
                payload,
                kind.make_inputs(case, generator(seeds.inputs, "cuda")),
            )
            if flags:
                pytest.fail(f"the grader would withhold this problem's performance points: {flags[0]}", pytrace=False)
        benchmark.group = f"{self.problem}: {case.name}"
        benchmark.name = f"{case.name}[{impl}]"
        REPLAY.load(samples)
        benchmark.pedantic(_replayed_round, rounds=len(samples), warmup_rounds=0)
        if not REPLAY.spent:
            raise RuntimeError(
                f"pytest-benchmark took fewer rounds than the {len(samples)} measured; is --benchmark-timer set?"
            )
        median = benchmark.stats.stats.median
        value, unit = _achieved(kind, case, median)
        benchmark.extra_info.update(
            {"impl": impl, "achieved": round(value, 2), "unit": unit, "case": kind.describe(case)}
        )


REPLAY = SampleReplay()


def _replayed_round() -> None:
    """The round pytest-benchmark 'runs': already run and timed by `timing.measure`."""
