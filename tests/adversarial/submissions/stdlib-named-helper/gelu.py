"""A helper named like a standard-library module: `code.py` beside gelu.py (gelu_kernels.py is the same file).

In a worker `import code` found this file; in `pytest handout`, whose pytest had loaded the standard
`code` already, it found that one (issue 29). Refused in both, with the name to change.
"""
from code import triton_gelu  # noqa: F401
