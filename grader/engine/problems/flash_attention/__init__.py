"""Problem 4, FlashAttention-2: the case model, the float64 definition and the kind the grader runs."""

from grader.engine.problems.flash_attention.kind import AttentionCase, FlashAttention, attention_definition
from grader.engine.problems.flash_attention.saved_lse import find_saved_lse

KIND = FlashAttention()

__all__ = ["KIND", "AttentionCase", "FlashAttention", "attention_definition", "find_saved_lse"]
