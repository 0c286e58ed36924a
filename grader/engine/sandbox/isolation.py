"""IsolationPlan: what one worker may see and who it runs as, as plain data.

grader/engine/sandbox/plan.py makes it from the sandbox's config and what this machine allows; the
modules that spawn, list, sweep and copy out of a worker only read it, so they need nothing of
the config (the config names the grading's scope, which lists each worker by its plan).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class IsolationPlan:
    level: str
    uid: int | None = None
    gid: int | None = None
    #: the uid is this worker's alone: the sweep kills everything it owns
    private_uid: bool = False
    hide: list[Path] = field(default_factory=list)
    #: folders covered by an empty tmpfs (outermost first) and the paths bound back inside them
    covers: list[Path] = field(default_factory=list)
    keep: list[Path] = field(default_factory=list)
    protect_proc: bool = False
