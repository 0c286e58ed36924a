"""What a grading is asked to do (GradeOptions), and the facts about a submission and this machine it records.

No torch at import: the command line builds these before anything heavy is loaded.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from grader import ROOT
from grader.engine.orchestrator.launch import DEFAULT_SECRET, GradeCommand, resolve_device
from grader.engine.records.model import RunEnvironment

if TYPE_CHECKING:
    from grader.engine.orchestrator.progress import ProblemEvent

__all__ = ["DEFAULT_SECRET", "GradeOptions", "resolve_device"]


@dataclass
class GradeOptions:
    device: str = "auto"
    timeout: float | None = None
    secret: str = DEFAULT_SECRET
    worker_user: str = "nobody"
    problems: list[str] | None = None
    hide: list[Path] = field(default_factory=list)
    time_performance: bool = True
    reference_dir: Path = ROOT / "reference"
    progress: Callable[[str], None] | None = None
    #: each problem as it starts and ends (`grader grade` prints them as plain lines)
    events: Callable[[ProblemEvent], None] | None = None
    #: problems whose correctness cases run at once, each in its own worker (None: all of them on
    #: a GPU, where the time goes to compiling kernels on the CPU; one at a time on the CPU)
    parallel: int | None = None
    #: where each submission's compiled kernels are kept between gradings (None: not kept)
    kernel_cache: Path | None = None
    #: profile one warm call of each benchmark shape (`grader.engine.harness.kernel_profile`; GPU only)
    profile: bool = False


def options_for(command: GradeCommand) -> GradeOptions:
    """What the engine is asked to do by `grader grade`'s command line (grader.engine.orchestrator.launch, parsed)."""
    return GradeOptions(
        device=command.device,
        timeout=command.timeout,
        secret=command.secret,
        worker_user=command.worker_user,
        problems=list(command.problems) if command.problems else None,
        hide=list(command.hide),
        time_performance=command.timing,
        profile=command.profile,
        parallel=command.parallel,
        kernel_cache=command.kernel_root(),
    )


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
