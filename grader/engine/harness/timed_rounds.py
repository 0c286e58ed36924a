"""Timed rounds that no cache can serve, and the sample of them whose outputs are checked.

A timed call used to see the same few input sets over and over, and nobody looked at what it
returned: a kernel that was right for the first calls of a shape and did half the work after
them was credited (0.81-0.91 of the reference on the H200, against 0.35-0.48 for its honest
version), and a cache keyed on a cheap fingerprint of the contents was caught only where it beat
the roofline floor. So, around every timed round and outside its CUDA events:

- before it, the round's input set gets new contents, drawn on the GPU from a per-round seed
  (same shapes, dtypes and layouts): no cache keyed on a pointer, an object or any function of
  the contents can serve any timed round;
- after it, when the round is chosen (the last of every chunk of queued rounds, and each other
  round with probability 1/VERIFY_EVERY, from a seed the submission is not given), the facts of
  its outputs (`output_facts`, as correctness sends them) and a sample of their values, gathered
  on the GPU (`ProblemKind.sample`/`take`), are kept for the trusted side to judge: the output
  contract and the float64 definition (`grader.engine.judge.round_checks.verify_rounds`).

The same hooks run in the grader's worker and in the handout's benchmarks (in-process), so a
student sees locally the verdict the grade will give. The seeds come from the orchestrator, and
the orchestrator recomputes every seed and every sample itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from grader.engine.harness.recording import settle_modes
from grader.engine.harness.watch import GUARD
from grader.engine.problems.base import ProblemKind, chosen, output_facts, round_seed
from grader.engine.protocol import VerifiedRound
from grader.engine.spec.model import Case


@dataclass
class Taken:
    """One checked round as the timing side saw it: its outputs' facts and sampled values."""

    index: int
    facts: dict[str, dict[str, Any]]
    slices: dict[str, torch.Tensor]
    issues: list[str]


@dataclass
class FreshRounds:
    """`timing.RoundHooks` for the student's side of one benchmark shape: new contents before a
    round, its outputs' facts and a sample of their values after it, when it is chosen.

    `index` counts timed rounds over every measurement of the shape, so contents never repeat
    between alternations.
    """

    kind: ProblemKind
    case: Case
    sets: list[dict[str, Any]]
    refill_base: int
    verify_base: int
    index: int = 0
    taken: list[Taken] = field(default_factory=list)

    _gen: torch.Generator | None = None

    def seeded(self, seed: int) -> torch.Generator:
        """One generator, reseeded per draw: building one per round cost more host time than the
        draw (a launch reads the generator's state when it is queued, so reseeding is safe)."""
        if self._gen is None:
            tensor = next(v for v in self.sets[0].values() if isinstance(v, torch.Tensor))
            self._gen = torch.Generator(device=tensor.device)
        return self._gen.manual_seed(seed)

    def before(self, input_set: int) -> None:
        self._settle()
        self.kind.refill(self.sets[input_set], self.case, self.seeded(round_seed(self.refill_base, self.index)))

    def after(self, result: Any, chunk_end: bool) -> None:
        self._settle()
        index = self.index
        self.index += 1
        if not (chunk_end or chosen(self.verify_base, index)):
            return
        outputs = self.kind.timed_outputs(result)
        facts = {name: output_facts(value) for name, value in outputs.items()}
        slices: dict[str, torch.Tensor] = {}
        issues: list[str] = []
        if all(f["exact"] for f in facts.values()):  # a subclass's indexing is the student's code
            plan = self.kind.sample(self.case, self.seeded(round_seed(self.verify_base, index)))
            try:
                slices = self.kind.take(outputs, self.case, plan)
            except Exception as exc:  # noqa: BLE001 - an output that cannot even be indexed
                issues = [f"its outputs could not be read: {type(exc).__name__}: {str(exc)[:300]}"]
        self.taken.append(Taken(index, facts, slices, issues))

    @staticmethod
    def _settle() -> None:
        """A mode left on PyTorch's stacks would run inside the refill and the sampling: taken off
        (a dispatch mode is reported as tampering, as after a correctness call)."""
        for left in settle_modes():
            GUARD.flag(left)

    def drain(self) -> tuple[list[VerifiedRound], dict[str, torch.Tensor]]:
        """The checked rounds since the last drain: (per round its index, outputs' facts and
        issues; the samples on the CPU)."""
        meta = [
            VerifiedRound(round=t.index, outputs=t.facts, issues=[str(i)[:500] for i in t.issues[:4]])
            for t in self.taken
        ]
        payload = {
            f"{t.index}:{label}": value.detach().to("cpu").contiguous()
            for t in self.taken
            for label, value in t.slices.items()
        }
        self.taken = []
        return meta, payload
