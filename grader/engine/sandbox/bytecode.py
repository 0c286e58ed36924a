"""Compiled bytecode for what a worker imports, kept once per machine outside the packages.

A worker imports PyTorch, Triton and the harness afresh (about 2,100 of PyTorch's modules). Where
the packages ship no `.pyc` files and their folders are read-only (the lent H200's PyTorch: none
of its 2,141 modules compiled), every worker compiled all of them from source: 8-10 s of an
H200 worker's start, against 2.5 s with bytecode. So the first worker of a machine fills a
folder of bytecode (Python's `pycache_prefix`) by importing the worker's modules in a child of
the orchestrator, and every worker reads it (`-X pycache_prefix=...`) and writes nothing there (`-B`).

The orchestrator reads the same folder when it is there and PyTorch has no bytecode of its own
(`use_here`): the lent H200's `grader grade` spent about 5 s of its own start compiling PyTorch.
It may write into it (it is the folder's owner and imports only trusted code).

Only a worker under another uid than the orchestrator's, in its own mount namespace (where the
folder is bound in), reads it: a worker running as the folder's owner could write bytecode that
the next student's worker would run, and a worker without a namespace may not reach the folder
(its imports would then compile everything, the packages' own bytecode unused).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import threading
from importlib import metadata
from pathlib import Path

from grader import ROOT

ENV = "GRADER_BYTECODE_CACHE"
FILL_TIMEOUT_S = 300.0
_LOCK = threading.Lock()
_FILLED: dict[Path, bool] = {}


def folder() -> Path:
    """$GRADER_BYTECODE_CACHE, else ~/.cache/grader/bytecode/<this interpreter>."""
    chosen = os.environ.get(ENV)
    if chosen:
        return Path(chosen)
    tag = sys.implementation.cache_tag or "python"
    return Path.home() / ".cache" / "grader" / "bytecode" / tag


#: what the fill imports: the worker's modules, and the orchestrator's for a grading and a batch
FILL_IMPORTS = (
    "grader.engine.harness.serve",
    "grader.engine.orchestrator.grade",
    "grader.engine.records.report",
    "grader.course.batch.run",
)


def _versions() -> str | None:
    """What the bytecode was compiled from: PyTorch's and Triton's versions, and which interpreter
    and grader checkout (the folder mirrors their absolute paths: another venv is another fill).
    Read from the installed metadata, so that asking costs no import of PyTorch; None without them."""
    try:
        torch, triton = metadata.version("torch"), metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None
    where = hashlib.sha256(f"{sys.prefix}\n{ROOT}\n{','.join(FILL_IMPORTS)}".encode()).hexdigest()[:12]
    return f"torch{torch}-triton{triton}-{where}".replace("/", "_")


def _torch_ships_bytecode() -> bool:
    """Whether PyTorch's own `__pycache__` is there: then the packages' bytecode serves this process
    better than the folder, which holds only what a grading imports (anything else would be
    compiled from source at every start where writing bytecode is off: 1.8 s more for Ray and the
    web stack on the CI machine)."""
    spec = importlib.util.find_spec("torch")  # finds it without importing it
    if spec is None or not spec.origin:
        return True
    return os.path.exists(importlib.util.cache_from_source(spec.origin))


def use_here(only_where_needed: bool = True) -> bool:
    """Point this process's imports at the folder when it is filled for these versions (never fills
    it), and only where PyTorch has no bytecode of its own (the lent H200) and no prefix was chosen."""
    versions = _versions()
    where = folder()
    if versions is None or not (where / f"filled-{versions}").is_file() or sys.pycache_prefix is not None:
        return False
    if only_where_needed and _torch_ships_bytecode():
        return False
    sys.pycache_prefix = str(where)
    return True


def ready() -> Path | None:
    """The folder, filled once per machine and versions of PyTorch and Triton; None if it cannot be.

    Filling imports the worker's modules in a child process with the folder as its pycache prefix
    (seconds, once); concurrent gradings of one machine may both fill it, which is harmless.
    """
    where = folder()
    with _LOCK:
        if where in _FILLED:
            return where if _FILLED[where] else None
        versions = _versions()
        marker = where / f"filled-{versions}"
        ok = versions is not None and marker.is_file()
        if versions is not None and not ok:
            try:
                where.mkdir(parents=True, exist_ok=True)
                os.chmod(where, 0o755)
                done = subprocess.run(
                    [sys.executable, "-X", f"pycache_prefix={where}", "-c", f"import {', '.join(FILL_IMPORTS)}"],
                    cwd=ROOT,
                    # written even where the environment says not to (that is how packages end up without any)
                    env={
                        **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                        "PYTHONPATH": str(ROOT),
                    },
                    capture_output=True,
                    timeout=FILL_TIMEOUT_S,
                )
                ok = done.returncode == 0
                if ok:
                    marker.write_text("the worker's imports, compiled\n")
                    _open_up(where)
            except (OSError, subprocess.SubprocessError):
                ok = False
        _FILLED[where] = ok
        return where if ok else None


def _open_up(where: Path) -> None:
    """Readable by every worker's uid (never writable: see the module's docstring)."""
    for base, dirs, files in os.walk(where):
        for name in dirs:
            os.chmod(os.path.join(base, name), 0o755)
        for name in files:
            os.chmod(os.path.join(base, name), 0o644)


def worker_flags(worker_uid: int | None, namespace: bool) -> list[str]:
    """The interpreter flags of a worker running as `worker_uid` (None: the orchestrator's own),
    in a mount namespace of its own or not (see the module's docstring)."""
    if not namespace or worker_uid is None or worker_uid == os.geteuid():
        return []
    where = ready()
    return ["-B", "-X", f"pycache_prefix={where}"] if where is not None else []
