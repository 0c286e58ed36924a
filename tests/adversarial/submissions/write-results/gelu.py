"""Attack: forge the result files, and leave files wherever the grader might look."""
import json
import os

import torch

TARGETS = [
    "@@OUT@@/result.json",
    "@@OUT@@/pwned-@@TOKEN@@",
    "@@OUT@@/gradescope/results.json",
    "@@SUBMISSION@@/pwned-@@TOKEN@@",
    "@@ROOT@@/pwned-@@TOKEN@@",
    "/tmp/pwned-@@TOKEN@@",
    "/var/tmp/pwned-@@TOKEN@@",
    "/dev/shm/pwned-@@TOKEN@@",
    "pwned-@@TOKEN@@",
]
FORGED = json.dumps({"score": 120, "max_score": 120, "tests": []})

for target in TARGETS:
    try:
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        with open(target, "w") as f:
            f.write(FORGED)
        print(f"WROTE {target}")
    except OSError as exc:
        print(f"DENIED {target}: {exc.strerror}")


def triton_gelu(x):
    return torch.zeros_like(x)
