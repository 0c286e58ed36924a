"""What a grading is asked to do (GradeOptions), and the facts about a submission and this machine it records.

No torch at import: the command line builds these before anything heavy is loaded.
"""

from __future__ import annotations

import hashlib
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader import ROOT
from grader.records.model import RunEnvironment

if TYPE_CHECKING:
    from grader.orchestrator.progress import ProblemEvent

DEFAULT_SECRET = "local-default-secret"


@dataclass
class GradeOptions:
    device: str = "auto"
    timeout: float | None = None
    secret: str = DEFAULT_SECRET
    worker_user: str = "nobody"
    problems: list[str] | None = None
    hide: list[Path] = field(default_factory=list)
    time_performance: bool = True
    student: str | None = None
    reference_dir: Path = ROOT / "reference"
    progress: Callable[[str], None] | None = None
    #: each problem as it starts and ends (`grader grade` prints them as plain lines)
    events: Callable[[ProblemEvent], None] | None = None
    #: problems whose correctness cases run at once, each in its own worker (None: all of them on
    #: a GPU, where the time goes to compiling kernels on the CPU; one at a time on the CPU)
    parallel: int | None = None
    #: where each submission's compiled kernels are kept between gradings (None: not kept)
    kernel_cache: Path | None = None
    #: profile one warm call of each benchmark shape (`grader.harness.kernel_profile`; GPU only)
    profile: bool = False


def resolve_device(requested: str) -> str:
    import torch

    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda was asked for, but PyTorch sees no CUDA GPU on this machine")
    return requested


def submission_files(path: Path) -> list[Path]:
    skip = {"__pycache__", ".git", ".ipynb_checkpoints"}
    return sorted(
        p for p in path.rglob("*") if not p.is_symlink() and p.is_file() and not skip & set(p.relative_to(path).parts)
    )


def submission_hash(path: Path) -> str:
    """Content hash over relative paths and bytes: the same files give the same hash anywhere."""
    digest = hashlib.sha256()
    for file in submission_files(path):
        digest.update(str(file.relative_to(path)).encode() + b"\x00")
        digest.update(file_sha256(file))
    return digest.hexdigest()


def file_sha256(path: Path) -> bytes:
    """One file's SHA-256, read in 1 MiB chunks (hashlib.file_digest is Python 3.11+)."""
    file_digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            file_digest.update(chunk)
    return file_digest.digest()


def environment(device: str, isolation: str) -> RunEnvironment:
    import torch
    import triton

    name = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    return RunEnvironment(
        device=name,
        torch=torch.__version__,
        triton=triton.__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        isolation=isolation,
        interpreter=device == "cpu",
    )
