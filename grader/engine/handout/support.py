"""What the public handout tests run: the grader's own cases, inputs and checks, in-process.

A student's `pytest handout` uses the same input generator, the same float64 definitions and the
same checks as the grader, so a test that passes locally passes the same public case when graded
(the graded inputs are drawn with a secret seed, so they differ in values, never in kind).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from grader.engine import timing
from grader.engine.handout import errors
from grader.engine.harness import calls, student_runtime, timed_watch, tracebacks
from grader.engine.harness.timed_rounds import FreshRounds
from grader.engine.harness.watch import GUARD, arm, tamper_message
from grader.engine.judge.checks import case_label, check_call, kernel_check
from grader.engine.judge.performance import ShapeSeeds, watched_flags
from grader.engine.judge.roofline import achieved as _achieved
from grader.engine.judge.round_checks import verify_rounds
from grader.engine.judge.windows import watch_round
from grader.engine.loading import load_function
from grader.engine.problems import REGISTRY
from grader.engine.problems.base import case_seed, generator, move_inputs
from grader.engine.problems.memory_estimate import Estimate, estimate, gib
from grader.engine.spec import gpu_limits
from grader.engine.spec.load import load_assignment
from grader.engine.spec.model import Case, Problem

PUBLIC_SECRET = "public"

student_runtime.prepare()  # the process settings of the grader's worker


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
    """Loads submission modules once and checks cases against the float64 definitions."""

    def __init__(self, submission: Path, device: str, full_trace: bool = False) -> None:
        self.submission = submission.resolve()
        self.device = device
        #: pytest's --full-trace: a submission's error is raised whole instead of summed up
        self.full_trace = full_trace
        self.spec = load_assignment(hidden=False)
        self._functions: dict[str, Callable[..., Any]] = {}
        #: what each problem's module replaced of the harness, at import or in a call (as the
        #: worker's guard reports it: that problem fails, the others are not touched)
        self.tampered: dict[str, list[str]] = {}
        self.fresh = calls.FreshInputs()
        arm()  # before any submission module is imported, as in the worker

    def function(self, problem: str) -> Callable[..., Any]:
        if problem not in self._functions:
            p = self.spec.problem(problem)
            if not (self.submission / f"{p.module}.py").is_file():
                pytest.fail(f"{self.submission} has no {p.module}.py", pytrace=False)
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

    def check(self, problem: str, case: Case) -> None:
        """Every correctness rule of the grader, on this case's public inputs: outputs, inputs and
        the kernel check; the call is made by the grader worker's own `calls.run`."""
        kind, spec = REGISTRY[problem], self.spec.problem(problem)
        fn = self.function(problem)
        for repeat in range(case.repeats):
            inputs = kind.make_inputs(case, generator(case_seed(PUBLIC_SECRET, problem, case, repeat)))
            expected = kind.expected(inputs, case)
            GUARD.tampered = []  # this call's own: the worker keeps them per problem, each in its own process
            outcome = calls.run(kind, fn, case, move_inputs(inputs, self.device), self.device, self.fresh, watch=True)
            self._note_tampering(problem, GUARD.tampered)
            tampered = self.tampering(problem)
            if tampered:
                pytest.fail(f"{case_label(kind, case, inputs)}\n{tampered}", pytrace=False)
            if isinstance(outcome.error, NotImplementedError):
                pytest.fail(f"NotImplementedError: {outcome.error}", pytrace=False)
            if outcome.error is not None:
                if self.full_trace:
                    raise outcome.error
                hint = gpu_limits.hint(str(outcome.error))  # as the grader's worker adds it
                label, call = case_label(kind, case, inputs), f"call {repeat + 1} of {case.repeats}:"
                frames, innermost = (
                    tracebacks.student_frames(outcome.error, self.submission),
                    tracebacks.chain(outcome.error)[-1],
                )
                pytest.fail(errors.summary(label, call, frames, innermost, self.submission, hint), pytrace=False)
            assert outcome.result is not None
            cheat = kernel_message(spec, case, outcome.profile, outcome.triton_launches, self.submission)
            meta, payload = calls.describe_outputs(outcome.result, outcome.inputs, outcome.snapshots)
            changed = outcome.changed_inputs()
            verdict = check_call(kind, spec, case, self.device, expected, payload, meta, changed, outcome.gpu_compiles)
            failures = [m for m in (verdict.message if not verdict.passed else "", cheat) if m]
            if failures:
                label = case_label(kind, case, inputs)
                label += " (compile-only: compiled for the GPU, not run)" if case.compile_only else ""
                pytest.fail(
                    f"{label}\ncall {repeat + 1} of {case.repeats}:\n" + "\n".join(failures),
                    pytrace=False,
                )

    def memory(self, problem: str, case: Case) -> Estimate:
        """The estimated GPU memory of one timed call at benchmark `case` (meta tensors, no GPU);
        what the submission's code replaced meanwhile fails the test as in `check`."""
        fn = self.function(problem)
        GUARD.tampered = []
        result = estimate(REGISTRY[problem], fn, case, self.submission)
        self._note_tampering(problem, GUARD.restore())
        tampered = self.tampering(problem)
        if tampered:
            pytest.fail(f"{case.name}\n{tampered}", pytrace=False)
        return result


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
        profile.get("foreign_work", ()),
    )
    return cheat and f"kernel check: {cheat} (the grader gives 0 for this problem)"


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
