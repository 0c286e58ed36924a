"""SandboxConfig: every limit and choice of the worker sandbox, in one place the CLI fills in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grader.engine.sandbox.scope import GradingScope


@dataclass
class SandboxConfig:
    device: str
    hide: list[Path] = field(default_factory=list)
    worker_user: str = "nobody"
    memory_bytes: int | None = 8 << 30
    cpu_seconds: int = 600
    #: per worker (its transient uid); threads count too: torch, CUDA and torch.compile's
    #: compile workers need a few hundred at most
    max_processes: int = 512
    max_file_bytes: int = 256 << 20
    output_bytes: int = 64 << 10
    #: size of the worker's private temp folder (/tmp, /var/tmp and /dev/shm get 64 MiB at most)
    tmpfs_bytes: int = 256 << 20
    #: size of the worker's private home, which holds its Triton cache: one problem of the
    #: reference alone compiles 178 MiB of it on the H200 (docs/performance.md)
    home_tmpfs_bytes: int = 1 << 30
    #: the submission copy: files beyond this total are left out (and said so in the output)
    submission_bytes: int = 64 << 20
    #: the worker's share of GPU memory through PyTorch's allocator (advisory: see docs/defenses.md)
    gpu_memory_fraction: float | None = 0.75
    #: a uid per worker rather than `worker_user` (see grader/engine/sandbox/__init__.py)
    private_uid: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    #: the grading's scope (grader/engine/sandbox/scope.py): every worker is listed there before it is
    #: spawned, so that none outlives the grading; None for a worker on its own (tests)
    scope: GradingScope | None = None
