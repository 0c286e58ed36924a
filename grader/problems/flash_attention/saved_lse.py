"""Where forward's logsumexp L is found: among the tensors the autograd graph saved for backward.

A forward may save more than one float32 tensor of L's shape (a base-2 copy for an exp2 backward,
say); the write-up asks only that L be among them, so when there are several the one nearest the
definition on a few query rows is taken (the trusted side then checks it on every element).
"""

from __future__ import annotations

import math

import torch


def saved_lse_candidates(out: torch.Tensor, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """The saved float32 tensors of `shape` in the autograd graph just behind `out`, nearest first."""
    found: list[torch.Tensor] = []
    frontier = [getattr(out, "grad_fn", None)]
    for _ in range(16):  # a wrapper may put casts and views between the Function and what it returns
        nxt = []
        for node in frontier:
            if node is None:
                continue
            try:
                saved = node.saved_tensors
            except (AttributeError, RuntimeError):
                saved = ()
            for t in saved:
                if isinstance(t, torch.Tensor) and tuple(t.shape) == shape and t.dtype == torch.float32:
                    if not any(t is seen for seen in found):
                        found.append(t)
            nxt.extend(fn for fn, _ in getattr(node, "next_functions", ()))
        frontier = nxt
    return found


def find_saved_lse(out: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor | None:
    """The first saved float32 tensor of `shape` behind `out` (what a kernel's own tests read)."""
    found = saved_lse_candidates(out, shape)
    return found[0] if found else None


def closest_lse(
    candidates: list[torch.Tensor], q: torch.Tensor, k: torch.Tensor, causal: bool, rows: int = 8
) -> torch.Tensor | None:
    """Of several candidates, the one nearest the float64 logsumexp on `rows` spread query rows."""
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    nq = q.shape[-2]
    picked = torch.linspace(0, nq - 1, min(rows, nq), device=q.device).round().long().unique()
    scores = (q[..., picked, :].double() @ k.double().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        keys = torch.arange(k.shape[-2], device=q.device)
        scores = scores.masked_fill(keys[None, :] > picked[:, None], float("-inf"))
    want = torch.logsumexp(scores, dim=-1)

    def distance(candidate: torch.Tensor) -> float:
        got = candidate[..., picked].double()
        return float(torch.nan_to_num((got - want).abs(), nan=float("inf")).max())

    return min(candidates, key=distance)
