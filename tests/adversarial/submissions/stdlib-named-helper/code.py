"""The helper gelu.py imports: the correct example's GeLU (copied in as correct_gelu.py by the corpus test)."""

from correct_gelu import triton_gelu  # noqa: F401
