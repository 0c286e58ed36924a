"""The float64 definition of attention that expected outputs come from.

The one home of this math: the reference kernel's tests and the attention benchmark import it.
"""

from __future__ import annotations

import math

import torch


def attention_definition(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax(q k^T / sqrt(D)) v and the natural-log logsumexp of each row of scaled scores.

    Causal is top-left aligned: query i sees keys j <= i.
    """
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        nq, nk = scores.shape[-2:]
        hidden = torch.ones(nq, nk, dtype=torch.bool, device=q.device).triu(diagonal=1)
        scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    return torch.exp(scores - lse.unsqueeze(-1)) @ v, lse
