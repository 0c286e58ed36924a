"""How many submissions a batch grades at once on one GPU (`--jobs auto`, the default on a GPU).

A grading's correctness phase is mostly CPU work (worker start-up, Triton compiles) and a few
milliseconds of GPU per call; its timing phase needs the GPU alone, and gets it through the GPU's
lease (grader/engine/orchestrator/gpu_lease.py) whatever the concurrency. So the concurrency is set by
what the correctness phases need: cores for compiling (a grading runs a worker per problem) and
GPU memory for their inputs and CUDA contexts. On a CPU the default stays one at a time, in
this process.
"""

from __future__ import annotations

import os

#: cores one grading keeps busy while its problems' workers compile
CORES_PER_GRADING = 2
#: GPU memory one grading's workers may hold at once (contexts, the largest cases' tensors)
GPU_BYTES_PER_GRADING = 8 << 30
#: past this, the timing queue, not compiling, sets the pace
MAX_PER_GPU = 8


def parse_jobs(text: str | int | None) -> int | None:
    """`--jobs N` -> N (at least 1); `--jobs auto` (or nothing) -> None: chosen from the machine."""
    if text is None or str(text).strip().lower() == "auto":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"--jobs {text!r}: expected a number of submissions at once, or 'auto'") from None
    if value < 1:
        raise ValueError(f"--jobs {text!r}: at least 1")
    return value


def per_gpu(cores: int, free_gpu_bytes: int, gpus: int = 1) -> int:
    """Gradings at once on each GPU, from the cores (shared by every GPU's gradings) and one GPU's free memory."""
    by_cores = max(1, cores // max(1, gpus) // CORES_PER_GRADING)
    by_memory = max(1, free_gpu_bytes // GPU_BYTES_PER_GRADING)
    return max(1, min(by_cores, by_memory, MAX_PER_GPU))


def auto_per_gpu(gpus: int = 1) -> int:
    """`per_gpu` for this machine: its cores and the current GPU's free memory."""
    import torch

    free, _ = torch.cuda.mem_get_info()
    return per_gpu(len(os.sched_getaffinity(0)), free, gpus)


def jobs_at_once(device: str, given: int | None, gpus: int = 1) -> int:
    """Gradings at once per GPU (`given`, else `auto_per_gpu`), and one at a time on a CPU unless given."""
    if given is not None:
        return given
    return auto_per_gpu(gpus) if device == "cuda" else 1
