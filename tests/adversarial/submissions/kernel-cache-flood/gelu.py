"""Attack: fill the worker's Triton cache with 50 000 empty files named as Triton names its own.

The orchestrator keeps a worker's cache for the next grading of the same code; reading 400k such
files once tripled a grading's time (issue 29).
"""
import os


FLOOD = 50_000
folder = os.path.join(os.environ["TRITON_CACHE_DIR"], "FLOODKEY")
os.makedirs(folder, exist_ok=True)
for i in range(FLOOD):
    open(os.path.join(folder, f"f{i}.json"), "w").close()

from correct_gelu import triton_gelu  # noqa: E402,F401  (a correct kernel: the attack is above)
