"""Where forward's logsumexp L is found: among the tensors the autograd graph saved for backward."""

from __future__ import annotations

import torch


def find_saved_lse(out: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor | None:
    """Look through the autograd graph just behind `out` for a saved float32 tensor of `shape`."""
    frontier = [getattr(out, "grad_fn", None)]
    for _ in range(4):
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
                    return t
            nxt.extend(fn for fn, _ in getattr(node, "next_functions", ()))
        frontier = nxt
    return None
