"""Performance: the student's kernel (in the worker) against the reference (here), same GPU, same run.

For each benchmark shape the two are timed in alternating chunks, so that clock and thermal
drift land on both; the ratio t_reference / t_student per shape, and its geometric mean over the
problem's shapes, is what is scored — never an absolute time. Two guards flag a time instead of
rewarding it: a median below the roofline floor of the shape (bytes over peak bandwidth, flops
over peak rate: physically impossible, so the timing was subverted), and a median that the
orchestrator's own wall clock around a plain loop of calls contradicts (side streams, patched
timers). The timing itself runs in the orchestrator (grader/engine/orchestrator/shape_timing.py); here
are what it asks for, the flags its numbers raise, and the score they make.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader import ROOT
from grader.engine import protocol
from grader.engine.judge import gpu_state, stopping
from grader.engine.judge.checks import kernel_check
from grader.engine.judge.scoring import performance_fraction
from grader.engine.loading import load_function
from grader.engine.problems.base import ProblemKind, case_seed, generator
from grader.engine.records.model import Performance, ShapeTiming, geomean
from grader.engine.spec.model import Case, Problem

#: the worker's reply to one alternation carries the sampled outputs of its checked rounds
MAX_TIMING_BLOB = 256 << 20
#: set to 1 only to measure what verified timing costs (benchmarks): rounds as before it existed
UNVERIFIED_ENV = "GRADER_UNVERIFIED_TIMING"

INPUT_SETS = 2
REFERENCE_DIR = ROOT / "reference"


@dataclass(frozen=True)
class ShapeSeeds:
    """The seeds of one benchmark shape, all from the secret: the worker is sent only its own."""

    inputs: int  # the input sets' first contents (and layouts)
    refill: int  # the student's timed rounds' contents
    verify: int  # which of the student's rounds are checked, and where
    reference: int  # the reference's and PyTorch's rounds' contents

    @classmethod
    def draw(cls, secret: str, problem: str, case: Case) -> ShapeSeeds:
        seeds = [case_seed(secret, problem, case, i) for i in range(4)]
        return cls(seeds[0] % (1 << 40), *seeds[1:])


class ReferenceSide:
    """The trusted reference and PyTorch, timed in the orchestrator's own process."""

    def __init__(self, kind: ProblemKind, problem: Problem, reference: Callable[..., Any]) -> None:
        self.kind, self.problem, self.reference = kind, problem, reference

    def calls(
        self, case: Case, seed: int
    ) -> tuple[list[Callable[[], Any]], list[Callable[[], Any]], list[dict[str, Any]]]:
        """Timed calls of the reference and of PyTorch, and the input sets they share."""
        ref, torch_calls, sets = [], [], []
        for i in range(INPUT_SETS):
            inputs = self.kind.make_inputs(case, generator(seed + i, "cuda"))
            ref.append(self.kind.timed(self.reference, inputs))
            torch_calls.append(self.kind.pytorch(inputs))
            sets.append(inputs)
        return ref, torch_calls, sets


def load_reference(problem: Problem, reference_dir: Path = REFERENCE_DIR) -> Callable[..., Any]:
    return load_function(reference_dir, problem.module, problem.function)


def clock_flags(median_s: float, floor_s: float, rounds: int, reported_s: float, wall_s: float) -> list[str]:
    """Why a shape's time cannot be trusted, from the numbers alone (a pure function: CPU-tested).

    `median_s` is the event-timed median of the student's rounds, `floor_s` the roofline floor;
    `reported_s` is what the worker says a loop of `rounds` calls took and `wall_s` what the
    orchestrator's own clock saw around that loop.
    """
    flags = []
    if median_s < floor_s:
        flags.append(
            f"median {median_s * 1e3:.4f} ms is below the roofline floor {floor_s * 1e3:.4f} ms (impossible: timing "
            f"subverted?)"
        )
    # the worker's own loop time must fit in our wall clock, and its events must not undercount it
    if reported_s > wall_s + 1e-3:
        flags.append(
            f"the worker reported {reported_s:.4f} s for a loop that took {wall_s:.4f} s on the orchestrator's clock"
        )
    # our own clock, less a generous allowance for the pipe and Python per call, bounds the real time
    if median_s * rounds < 0.5 * (wall_s - 2e-3 * rounds) and median_s > 50e-6:
        flags.append(
            f"event-timed median {median_s * 1e3:.4f} ms disagrees with {wall_s / rounds * 1e3:.4f} ms per call of "
            f"wall time (side stream or patched timer?)"
        )
    return flags


def launch_flags(launches: list[tuple[int, int]], label: str = "timed window {}") -> list[str]:
    """Windows whose rounds launched fewer of the submission's Triton kernels than they were rounds
    (`label` names one, given its number: the timed windows, or the wall-clock check's loop).

    The kernel rule holds for timed calls too: every call must launch a Triton kernel, as every
    correctness call must, so a submission cannot pass correctness with its kernel and then be
    timed on PyTorch's (or on a CUDA graph's replay, which Triton's launcher never sees).
    """
    for window, (launched, rounds) in enumerate(launches, 1):
        if launched < rounds:
            return [
                f"{label.format(window)}: {launched} Triton kernel launch(es) for {rounds} timed rounds (every "
                f"timed call must launch the submission's Triton kernel, as every correctness call must)"
            ]
    return []


def watched_flags(problem: Problem, case: Case, watched: list[protocol.WatchedChunk]) -> list[str]:
    """The kernel rule, in its own words, for the chunks of timed rounds run again under the
    profiler (grader.engine.harness.timed_watch): the first chunk that breaks it flags the shape."""
    for chunk in watched:
        why = kernel_check(
            problem,
            case,
            list(chunk.aten_ops),
            chunk.triton_launches,
            list(chunk.compiled_regions),
            graph_launches=chunk.graph_launches,
        )
        if why:
            last = chunk.first_round + chunk.rounds - 1
            which = "the first timed call" if chunk.first_round < 0 else f"timed rounds {chunk.first_round}-{last}"
            return [f"{which}, watched as correctness calls are: {why}"]
    return []


def verified_timing() -> bool:
    """Whether timed rounds get new contents and sampled checks (off only for the cost study)."""
    return os.environ.get(UNVERIFIED_ENV) != "1"


def shape_request(case: Case, seeds: ShapeSeeds, verified: bool | None = None) -> dict[str, Any]:
    """What every request about one benchmark shape carries: the case, its inputs' seed and sets,
    and (when timing is `verified`) the seeds of each round's new contents and of the checks."""
    shape: dict[str, Any] = {"case": case.model_dump(), "seed": seeds.inputs, "sets": INPUT_SETS}
    if case.gpu_memory_gib is not None:  # the shape's budget, applied by the worker (harness/memory_budget.py)
        shape["budget_bytes"] = int(case.gpu_memory_gib * (1 << 30))
    if verified_timing() if verified is None else verified:
        shape.update(refill_seed=seeds.refill, verify_seed=seeds.verify)
    return shape


def rule_for(problem: Problem) -> stopping.Rule:
    """The stopping rule of `problem`'s shapes: its thresholds, performance points and precision."""
    return stopping.Rule(
        problem.thresholds, problem.points.performance, problem.thresholds.precision, max(1, len(problem.benchmarks))
    )


def review_reason(problem: Problem, shapes: list[ShapeTiming]) -> str | None:
    """What a person should look at before grades are published (it costs no points): speedups past
    the spec's bound, and ratios measured while the GPU stayed throttled."""
    bound = problem.thresholds.review_above
    reasons = []
    fast = [s for s in shapes if s.ratio and s.ratio > bound]
    if fast:
        shown = ", ".join(f"{s.name} {s.ratio:.2f}x" for s in fast)
        reasons.append(
            f"faster than the staff reference by more than {bound:g}x on {shown}: the points stand; staff should "
            f"look before publishing"
        )
    throttled = [s.name for s in shapes if s.gpu_state is not None and s.gpu_state.throttled]
    if throttled:
        reasons.append(
            f"the GPU was throttled while {', '.join(throttled)} was timed, after {gpu_state.MAX_RETIMES} re-timings: "
            f"grade again before publishing"
        )
    return "; ".join(reasons) or None


def score(problem: Problem, shapes: list[ShapeTiming], gpu: str) -> Performance:
    ratios = [s.ratio for s in shapes if s.ratio]
    flagged = [f for s in shapes for f in s.flags]
    if flagged or len(ratios) != len(shapes):
        return Performance(
            status="flagged",
            reason="; ".join(flagged) or "some shapes were not timed",
            score=0.0,
            max_score=problem.points.performance,
            gpu=gpu,
            shapes=shapes,
        )
    mean = geomean(ratios)
    points = round(problem.points.performance * performance_fraction(problem.thresholds, mean), 4)
    halves = [math.log(s.ratio_high / s.ratio) if s.ratio and s.ratio_high else math.inf for s in shapes]
    low, high = stopping.score_interval(problem.thresholds, problem.points.performance, mean, halves)
    return Performance(
        status="measured",
        score=points,
        max_score=problem.points.performance,
        ratio_geomean=round(mean, 4),
        gpu=gpu,
        shapes=shapes,
        review=review_reason(problem, shapes),
        score_low=low,
        score_high=high,
    )
