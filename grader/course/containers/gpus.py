"""Which GPUs a batch may use: `--gpus all|0,1` parsed and checked against what the host has."""

from __future__ import annotations

import shutil
from collections.abc import Callable


def parse_gpus(spec: str | None, probe: Callable[[], list[str]] | None = None) -> list[str]:
    """`--gpus all` -> every GPU the host has; `--gpus 0,1` -> those. Device ids as strings."""
    if not spec:
        return []
    if spec.strip() == "all":
        found = (probe or host_gpus)()
        if not found:
            raise RuntimeError("--gpus all: this machine shows no NVIDIA GPU (nvidia-smi lists none)")
        return found
    ids = [part.strip() for part in spec.split(",") if part.strip()]
    if not ids:
        raise RuntimeError(f"--gpus {spec!r}: expected 'all' or a comma-separated list of GPU indices such as 0,1")
    if len(set(ids)) != len(ids):
        raise RuntimeError(f"--gpus {spec!r}: a GPU is named twice")
    return ids


def host_gpus() -> list[str]:
    """GPU indices on this host: from nvidia-smi (the host's venv may lack CUDA torch), else torch."""
    import subprocess

    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run(
                [smi, "--query-gpu=index", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            return [line.strip() for line in out.splitlines() if line.strip()]
        except (subprocess.SubprocessError, OSError):
            pass
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []
