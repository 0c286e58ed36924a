"""Attack: import the grader and make its checks pass, then return zeros."""
import sys

import torch

sys.path.insert(0, "@@ROOT@@")
try:
    import grader.engine.harness.calls
    import grader.engine.judge.checks

    grader.engine.judge.checks.check_call = lambda *args, **kwargs: grader.engine.judge.checks.Verdict(True, "")
    grader.engine.judge.checks.compare = lambda *args, **kwargs: None
    grader.engine.harness.calls.changed_inputs = lambda *args, **kwargs: []
    print("PATCHED a copy of the grader")
except Exception as exc:  # noqa: BLE001
    print(f"IMPORT-FAILED {type(exc).__name__}: {exc}")


def triton_gelu(x):
    return torch.zeros_like(x)
