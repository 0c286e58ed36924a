"""The sampled timed rounds, checked: a timed call must compute what a correctness call does.

The worker sends, for the rounds the seeds choose (and the last of each window), its outputs'
facts and a sample of their values; here they are judged against the correctness contract and
the float64 definition on inputs drawn again from the seeds (never taken from the worker).
`ShapeChecks` carries a timed shape's rounds from the exclusive window (grader/engine/orchestrator/shape_timing.py)
to the problem's finish (grader/engine/orchestrator/problem_result.py), which checks them once the GPU is
shared again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from grader.engine import protocol
from grader.engine.judge.checks import compare, output_contract, payload_issue
from grader.engine.judge.performance import ReferenceSide, ShapeSeeds
from grader.engine.problems.base import ProblemKind, chosen, generator, round_seed
from grader.engine.records.model import ShapeTiming
from grader.engine.spec.model import Case, Problem

#: the sampled outputs of one shape kept for checking after the exclusive window, at most: an
#: honest worker sends 16 rows of up to 4096 values per checked round (a few MB a shape); one
#: that sends more (up to MAX_TIMING_BLOB a window) is checked at once, as before, so that a
#: grading's four problems cannot keep gigabytes in the orchestrator until the window closes
DEFERRED_CHECK_BYTES = 64 << 20


def verify_rounds(
    kind: ProblemKind,
    problem: Problem,
    case: Case,
    seeds: ShapeSeeds,
    first: int,
    count: int,
    verified: list[protocol.VerifiedRound],
    payload: Any,
    inputs: dict[str, Any],
) -> list[str]:
    """Judge the checked rounds of one measurement, timed rounds `first .. first+count-1`.

    Every round the seeds choose, and the last, must have been checked. For each, the worker sent
    only data: its outputs' facts, judged here by the correctness contract (`output_contract`),
    and sampled values, compared with the float64 definition at the case's tolerance, the round's
    inputs and sample drawn again here from the seeds (never taken from the worker).
    Returns the flags (the first broken round only: one is enough to withhold the points).
    """
    last = first + count - 1
    payload = payload if isinstance(payload, dict) else {}
    rounds = {item.round: item for item in verified}
    required = {r for r in range(first, first + count) if chosen(seeds.verify, r)} | ({last} if count else set())
    missing = sorted(required - rounds.keys())
    if missing:
        return [
            f"{case.name}: timed round(s) {', '.join(map(str, missing[:5]))} were not checked (the worker left "
            f"them out)"
        ]
    device = next(v.device.type for v in inputs.values() if isinstance(v, torch.Tensor))
    for index in sorted(rounds):
        where = f"{case.name}, timed round {index + 1}"
        if not first <= index <= last:
            return [f"{where}: not a round of this measurement"]
        facts = rounds[index].outputs
        broken = [
            m
            for name in kind.timed_names
            if (m := output_contract(kind, case, device, name, list(kind.output_shape(name, case)), facts.get(name)))
        ]
        broken += rounds[index].issues
        if broken:
            return [f"{where}: {'; '.join(broken)}"]
        kind.refill(inputs, case, generator(round_seed(seeds.refill, index), device))
        plan = kind.sample(case, generator(round_seed(seeds.verify, index), device))
        for label, want in kind.expected_sample(inputs, case, plan).items():
            output = label.partition("[")[0]  # `take` labels a part of an output `name[part]`
            got = payload.get(f"{index}:{label}")
            message = payload_issue(label, got, list(want.shape), kind.expected_dtype(output, case))
            if message is None:
                tol = problem.tolerance_for(output, case.dtype)  # type: ignore[attr-defined]  # every case has one
                message = compare(label, got, want, tol.atol, tol.rtol)
            if message:
                return [
                    f"{where} computed a wrong result (the timed calls are checked like correctness calls): {message}"
                ]
    return []


@dataclass
class ShapeChecks:
    """A timed shape's sampled rounds, still to be checked against fresh inputs.

    Checking is GPU work of the orchestrator's (the inputs again, the float64 definition at the
    sampled places), but not timing: `grade` runs it once the GPU is no longer held alone, beside
    other gradings' correctness calls (about 0.8 s of a four-problem grading that held the GPU
    alone before)."""

    side: ReferenceSide
    case: Case
    seeds: ShapeSeeds
    checks: list[tuple[int, int, list[protocol.VerifiedRound], Any]]
    shape: ShapeTiming
    device: str = "cuda"  # where the inputs are drawn again (the worker drew them there)

    def held_bytes(self) -> int:
        """What the sampled outputs take in the orchestrator's memory until they are checked."""
        return sum(
            t.numel() * t.element_size()
            for _, _, _, payload in self.checks
            for t in (payload.values() if isinstance(payload, dict) else [])
            if isinstance(t, torch.Tensor)
        )

    def run(self) -> list[str]:
        """The flags of the first broken round (none when every checked round is right); they are
        added to the shape's own."""
        kind, flags = self.side.kind, []
        inputs = kind.make_inputs(self.case, generator(self.seeds.inputs, self.device))
        for first, count, verified, payload in self.checks:
            flags += verify_rounds(
                kind, self.side.problem, self.case, self.seeds, first, count, verified, payload, inputs
            )
            if flags:
                break
        del inputs
        self.shape.flags += flags
        return flags
