"""Where forward's logsumexp L is found: among the tensors the autograd graph saved for backward.

A forward may save more than one float32 tensor of L's shape (a base-2 copy for an exp2 backward,
say); the write-up asks only that L be among them, so when there are several the one nearest the
definition on a few query rows is taken (the trusted side then checks it on every element).
"""

from __future__ import annotations

import math

import torch


def _saved_tensors(out: torch.Tensor) -> list[torch.Tensor]:
    """Every tensor saved in the autograd graph just behind `out`, nearest first, each once."""
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
                if isinstance(t, torch.Tensor) and not any(t is seen for seen in found):
                    found.append(t)
            nxt.extend(fn for fn, _ in getattr(node, "next_functions", ()))
        frontier = nxt
    return found


def saved_lse_candidates(out: torch.Tensor, shape: tuple[int, ...]) -> list[torch.Tensor]:
    """The saved float32 tensors of `shape` in the autograd graph just behind `out`, nearest first."""
    return [t for t in _saved_tensors(out) if tuple(t.shape) == shape and t.dtype == torch.float32]


def missing_lse_message(out: torch.Tensor, shape: tuple[int, ...]) -> str:
    """Why no saved tensor is L: what was saved with L's number of elements, and how to fix it."""
    b, h, nq = shape
    near = [t for t in _saved_tensors(out) if t.numel() == b * h * nq and t.dim() >= 1]
    text = f"no float32 tensor of shape {shape} (B, H, Nq) among the tensors saved by forward"
    if not near:
        return text + " (ctx.save_for_backward must keep the logsumexp L)"
    t = near[0]
    found = f"{str(t.dtype).removeprefix('torch.')} tensor of shape {tuple(t.shape)}"
    fixes = []
    if t.dtype != torch.float32:
        fixes.append("keep it in float32 (`L.float()`, or a float32 buffer)")
    if tuple(t.shape) != shape:
        fixes.append(f"save it as (B, H, Nq) (`L.view({b}, {h}, {nq})` for a (B*H, Nq) buffer)")
    return f"{text}; found a {found} with L's number of elements: " + " and ".join(fixes)


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
