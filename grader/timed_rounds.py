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
  round with probability 1/VERIFY_EVERY, from a seed the submission is not given), a sample of
  its outputs is gathered on the GPU (`ProblemKind.sample`/`take`), to be checked against the
  float64 definition by the trusted side (`grader.performance.verify_rounds`).

The same hooks run in the grader's worker and in the handout's benchmarks (in-process), so a
student sees locally the verdict the grade will give. The seeds come from the orchestrator, and
the orchestrator recomputes every seed and every sample itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from grader.problems.base import ProblemKind, round_seed
from grader.spec import Case

#: a round other than a chunk's last is checked with probability 1 / VERIFY_EVERY
VERIFY_EVERY = 32
_CHOICE_SALT = 0x5BD1E995


def chosen(verify_base: int, index: int) -> bool:
    """Whether timed round `index` must be checked (besides the last round of every chunk)."""
    return round_seed(verify_base ^ _CHOICE_SALT, index) % VERIFY_EVERY == 0


@dataclass
class Taken:
    """One checked round as the timing side saw it: its sampled outputs and the rules it broke."""

    index: int
    slices: dict[str, torch.Tensor]
    issues: list[str]


@dataclass
class FreshRounds:
    """`timing.RoundHooks` for one benchmark shape: new contents before, a sample after.

    `index` counts timed rounds over every measurement of the shape, so contents never repeat
    between alternations. With `verify_base` None (the reference's side) rounds get new contents
    and nothing is kept: both sides of a comparison do the same work between rounds.
    """

    kind: ProblemKind
    case: Case
    sets: list[dict[str, Any]]
    refill_base: int
    verify_base: int | None = None
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
        self.kind.refill(self.sets[input_set], self.case, self.seeded(round_seed(self.refill_base, self.index)))

    def after(self, result: Any, chunk_end: bool) -> None:
        index = self.index
        self.index += 1
        if self.verify_base is None or not (chunk_end or chosen(self.verify_base, index)):
            return
        plan = self.kind.sample(self.case, self.seeded(round_seed(self.verify_base, index)))
        try:
            slices, issues = self.kind.take(self.kind.timed_outputs(result), self.case, plan)
        except Exception as exc:  # noqa: BLE001 - an output that cannot even be indexed is a broken rule
            slices, issues = {}, [f"its outputs could not be read: {type(exc).__name__}: {str(exc)[:300]}"]
        self.taken.append(Taken(index, slices, issues))

    def drain(self) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
        """The checked rounds since the last drain: (per round its index and issues, the samples on the CPU)."""
        meta = [{"round": t.index, "issues": [str(i)[:500] for i in t.issues[:4]]} for t in self.taken]
        payload = {f"{t.index}:{label}": value.detach().to("cpu").contiguous() for t in self.taken for label, value in t.slices.items()}
        self.taken = []
        return meta, payload
