"""Attack: import the grader and make its checks pass, then return zeros."""
import sys

import torch

sys.path.insert(0, "@@ROOT@@")
try:
    import grader.harness.calls
    import grader.judge.checks

    grader.judge.checks.check_call = lambda *args, **kwargs: grader.judge.checks.Verdict(True, "")
    grader.judge.checks.compare = lambda *args, **kwargs: None
    grader.harness.calls.changed_inputs = lambda *args, **kwargs: []
    print("PATCHED a copy of the grader")
except Exception as exc:  # noqa: BLE001
    print(f"IMPORT-FAILED {type(exc).__name__}: {exc}")


def triton_gelu(x):
    return torch.zeros_like(x)
