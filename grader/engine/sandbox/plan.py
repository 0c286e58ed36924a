"""What the worker may see and who it runs as: the isolation level this machine allows.

The plan is made in the orchestrator, before the spawn: which folders get an empty tmpfs
(the course checkout, private temp folders, folders others may not enter), which paths are
bound back inside them (Python, its packages, `grader/`), which are hidden, and the uid.
"""

from __future__ import annotations

import os
import pwd
import sys
from pathlib import Path

from grader import ROOT
from grader.engine.sandbox import bytecode
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.isolation import IsolationPlan
from grader.engine.sandbox.syscalls import kernel_at_least

GRADER_ROOT = ROOT
# world-writable folders that get a private, size-limited tmpfs in the worker's namespace
PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def blocked_ancestor(path: Path) -> Path | None:
    """The highest ancestor of `path` that others may not enter, if any."""
    for parent in reversed(path.parents):
        try:
            if not os.stat(parent).st_mode & 0o001:
                return parent
        except OSError:
            return None
    try:
        return path if not os.stat(path).st_mode & 0o001 else None
    except OSError:
        return None


def runtime_paths() -> list[Path]:
    """Folders the worker's interpreter needs: Python itself, its packages, and the grader."""
    import torch
    import triton

    paths = {
        Path(sys.base_prefix),
        Path(sys.prefix),
        Path(os.path.realpath(sys.executable)).parent,
        GRADER_ROOT / "grader",
    }
    paths |= {Path(torch.__file__).resolve().parent.parent, Path(triton.__file__).resolve().parent.parent}
    resolved = {p.resolve() for p in paths}
    # keep only outermost folders
    return sorted(p for p in resolved if not any(q != p and q in p.parents for q in resolved))


def _bytecode_folder() -> list[Path]:
    """The workers' kept bytecode (grader/engine/sandbox/bytecode.py), bound into a namespace worker's view
    wherever it lies; without a namespace a worker reads it only where file modes let it."""
    try:
        kept = bytecode.folder()
        kept.mkdir(parents=True, exist_ok=True)
        return [kept.resolve()]
    except OSError:
        return []


def _project_root() -> Path | None:
    """GRADER_ROOT when it is the course checkout (reference, hidden cases, .git): a thing to cover."""
    if (GRADER_ROOT / "pyproject.toml").is_file() or (GRADER_ROOT / "assignment").is_dir():
        return GRADER_ROOT
    return None


def plan_isolation(
    config: SandboxConfig, want_namespace: bool = True, uid: int | None = None, gid: int | None = None
) -> IsolationPlan:
    """What isolation this machine allows; `uid`/`gid` override `worker_user` (a transient uid)."""
    if os.geteuid() != 0:
        return IsolationPlan("none")
    if uid is None:
        try:
            user = pwd.getpwnam(config.worker_user)
        except KeyError:
            raise RuntimeError(
                f"the worker user {config.worker_user!r} does not exist on this machine (see --worker-user)"
            ) from None
        uid, gid = user.pw_uid, user.pw_gid
    plan = IsolationPlan("namespace" if want_namespace else "uid", uid=uid, gid=gid if gid is not None else uid)
    if want_namespace:
        plan.hide = [p.resolve() for p in config.hide if os.path.lexists(p)]
        plan.keep = runtime_paths() + _bytecode_folder()
        covers = {p for p in PRIVATE_TMP if p.is_dir() and not p.is_symlink()}
        root = _project_root()
        if root is not None:
            covers.add(root)
        for needed in plan.keep:
            blocked = blocked_ancestor(needed)
            if blocked is not None:
                covers.add(blocked)
        # a folder the runtime lives in (or under which it is) cannot be covered
        plan.covers = sorted(
            (c for c in covers if not any(k == c or k in c.parents for k in plan.keep)), key=lambda p: len(p.parts)
        )
        plan.protect_proc = kernel_at_least(5, 8)
    return plan
