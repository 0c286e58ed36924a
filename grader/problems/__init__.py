"""The problems of the assignment, by name. Each module holds one problem's cases, math and calls."""

from __future__ import annotations

from grader.problems.base import ProblemKind
from grader.problems.flash_attention import FlashAttention
from grader.problems.gelu import Gelu
from grader.problems.matmul import Matmul
from grader.problems.softmax import Softmax

REGISTRY: dict[str, ProblemKind] = {p.name: p for p in (Gelu(), Softmax(), Matmul(), FlashAttention())}
