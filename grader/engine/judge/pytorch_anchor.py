"""PyTorch's time for a benchmark shape, measured once per GPU and kept beside the reference's kernels.

A record shows PyTorch's time beside the student's and the reference's so a student sees how far
their kernel is from the library; it is never scored. Measured at every grading it cost each shape
a warm-up and 0.4 s of rounds inside the exclusive timing window: about 5 s of the 23 s a plain
four-problem grading spent timing on the H200, paid again by every student of a class for the same
number on the same GPU. So the first grading on a GPU measures it and the others read it.

Kept per physical GPU (its UUID), PyTorch version and shape, in the reference cache's folder
(grader/engine/judge/reference_cache.py; a read-only cache is read, and new times go to the process's
private overlay). A file that cannot be read is measured again, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from grader.engine.judge import reference_cache

SUBFOLDER = "pytorch-anchors"


def key(gpu_uuid: str, torch_version: str, problem: str, case_json: str) -> str:
    """One shape on one GPU under one PyTorch: the file name its time is kept under."""
    text = "\n".join((gpu_uuid, torch_version, problem, case_json))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def key_for(problem: str, case_json: str) -> str:
    """The key of one shape on the current CUDA device, under this process's PyTorch."""
    import torch

    uuid = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
    return key(uuid, torch.__version__, problem, case_json)


def _folders() -> tuple[Path | None, list[Path]]:
    """Where this process writes anchors (the reference cache it compiles into), and where it reads them."""
    own = os.environ.get("TRITON_CACHE_DIR")
    base = os.environ.get(reference_cache.BASE_ENV)
    write = Path(own) / SUBFOLDER if own else None
    reads = [p for p in (write, Path(base) / SUBFOLDER if base else None) if p is not None]
    return write, reads


def lookup(name: str, folders: list[Path] | None = None) -> float | None:
    """The kept median in ms, or None when this GPU has not measured this shape (or its file is bad)."""
    for folder in folders if folders is not None else _folders()[1]:
        try:
            value = json.loads((folder / f"{name}.json").read_text())["median_ms"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if isinstance(value, (int, float)) and value > 0 and value == value:
            return float(value)
    return None


def keep(name: str, median_ms: float, folder: Path | None = None) -> None:
    """Writes the time atomically (concurrent gradings of a class may measure the same shape)."""
    folder = folder if folder is not None else _folders()[0]
    if folder is None or not (median_ms > 0):
        return
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        handle, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(handle, "w") as out:
            json.dump({"median_ms": median_ms}, out)
        os.replace(tmp, folder / f"{name}.json")
    except OSError:
        pass  # a time not kept is measured again next time
