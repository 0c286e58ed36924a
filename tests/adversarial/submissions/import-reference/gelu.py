"""Attack: load the staff reference and return its output."""
import sys

sys.path.insert(0, "@@ROOT@@")
from reference.gelu import triton_gelu  # noqa: E402,F401
