"""The staff reference's compiled kernels and autotune results, kept once per machine.

The orchestrator times the reference in its own process. Without this, every grading (each
container, each Ray or Slurm task, each `grader grade`) starts with an empty Triton cache and
compiles and autotunes the reference again: one problem's autotuning alone took 268 s of a 298 s
cold grading on the H200. Here the orchestrator's TRITON_CACHE_DIR points at a cache of its own,

    ~/.cache/grader/reference-kernels/<assignment version>/<torch>-<triton>-<GPU>-sm<cc>/

(root: $GRADER_REFERENCE_CACHE; "off" switches it off), with Triton's on-disk autotune results
on (TRITON_CACHE_AUTOTUNING), so the first grading on a machine, or `grader reference-cache
build`, fills it and every later one loads it.

Never mixed with a submission's: workers get a TRITON_CACHE_DIR of their own (grader.engine.sandbox,
grader.engine.kernel_cache), and only the orchestrator, which never imports student code, writes here.
The folders are 0700: a worker's uid can neither read the reference's compiled code nor write
into it. Where the cache is there but not writable (mounted read-only into a grading container,
or owned by the staff account that built it), OverlayCache reads it and puts what is missing
into a private folder of the process instead.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

ENV = "GRADER_REFERENCE_CACHE"
BASE_ENV = "GRADER_REFERENCE_CACHE_BASE"  # the read-only cache OverlayCache reads (set by activate)


def default_root() -> Path | None:
    """$GRADER_REFERENCE_CACHE, else ~/.cache/grader/reference-kernels; None when switched off."""
    configured = os.environ.get(ENV)
    if configured:
        return None if configured.lower() in ("off", "0", "none") else Path(configured)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "grader" / "reference-kernels"


def machine_key() -> str:
    """What compiled code depends on: torch, Triton, the GPU model and its compute capability."""
    import torch
    import triton

    name = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    cc = "".join(map(str, torch.cuda.get_device_capability())) if torch.cuda.is_available() else "0"
    slug = re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-").lower()
    return f"torch{torch.__version__.split('+')[0]}-triton{triton.__version__}-{slug}-sm{cc}"


def location(version: str, root: Path | None = None) -> Path | None:
    """This machine's cache folder for one assignment version."""
    root = root if root is not None else default_root()
    if root is None:
        return None
    return root / re.sub(r"[^A-Za-z0-9._-]+", "_", version) / machine_key()


def activate(version: str, root: Path | None = None) -> Path | None:
    """Point this (orchestrator) process's Triton cache at the reference cache; returns the folder.

    Call it before the reference is imported: Triton reads TRITON_CACHE_AUTOTUNING when an
    autotuned kernel is defined. Idempotent.
    """
    folder = location(version, root)
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        pass  # a read-only mount: read it through the overlay
    os.environ["TRITON_CACHE_AUTOTUNING"] = "1"
    if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
        os.environ["TRITON_CACHE_DIR"] = str(folder)
        os.environ.pop("TRITON_CACHE_MANAGER", None)
        return folder
    os.environ[BASE_ENV] = str(folder)
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="grader-reference-overlay-")
    os.environ["TRITON_CACHE_MANAGER"] = f"{__name__}:OverlayCache"
    return folder


def _file_cache_manager() -> type:
    from triton.runtime.cache import FileCacheManager

    return FileCacheManager


class OverlayCache(_file_cache_manager()):  # type: ignore[misc]
    """Triton's file cache over two folders: reads fall back to the read-only reference cache
    ($GRADER_REFERENCE_CACHE_BASE), writes go to TRITON_CACHE_DIR (private to the process)."""

    def __init__(self, key: str, override: bool = False, dump: bool = False) -> None:
        super().__init__(key, override, dump)
        base = os.environ.get(BASE_ENV)
        self.base = os.path.join(base, key) if base and not (override or dump) else None

    def _base_path(self, filename: str) -> str | None:
        if self.base is None:
            return None
        path = os.path.join(self.base, filename)
        return path if os.path.isfile(path) else None

    def get_file(self, filename: str) -> str | None:
        return super().get_file(filename) or self._base_path(filename)

    def get_group(self, filename: str) -> dict[str, str] | None:
        own = super().get_group(filename)
        if own is not None:
            return own
        path = self._base_path(f"__grp__{filename}")
        if path is None:
            return None
        try:
            children: dict[str, Any] = json.loads(Path(path).read_text()).get("child_paths") or {}
        except (OSError, ValueError):
            return None
        # the group names absolute paths where it was built; the files sit beside it here
        found = {name: self._base_path(os.path.basename(str(child))) for name, child in children.items()}
        return {name: p for name, p in found.items() if p is not None}


def size(folder: Path) -> tuple[int, int]:
    """(files, bytes) under `folder`."""
    files = [p.lstat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink()]
    return len(files), sum(files)
