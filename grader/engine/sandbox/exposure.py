"""Before a worker starts at the "uid" level: can its user read what it must not?

At that level (root without CAP_SYS_ADMIN, as on Gradescope) no mount covers the hidden files:
only their modes keep the worker from them. A package that unpacked hidden_cases.toml
world-readable let a submission print every hidden case (issue 29). So the claim is checked,
not assumed: a short probe runs as the worker's uid and gid (no supplementary groups) and tries
to open each hidden path (the reference, the hidden cases, secret files, the results folder,
whatever `hide` names) and every file below a hidden folder, up to MAX_PATHS. If any opens, the
worker does not start and the grading stops with the list.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: paths probed at most (the hidden paths themselves, then files below hidden folders)
MAX_PATHS = 512
PROBE_TIMEOUT_S = 30.0

# Runs as the worker's uid: prints each path it could read, one per line.
PROBE = (
    "import os, sys\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').close()\n"
    "        print(p)\n"
    "    except OSError:\n"
    "        pass\n"
)


class HiddenPathsExposed(RuntimeError):
    """The worker's user could read a hidden path: hidden cases are not graded (nothing is)."""


def probe_paths(hide: list[Path], limit: int = MAX_PATHS) -> list[Path]:
    """The hidden paths that exist, then the files and folders below the hidden folders."""
    paths = [p for p in hide if os.path.lexists(p)]
    below: list[Path] = []
    for top in paths:
        if not top.is_dir() or top.is_symlink():
            continue
        for folder, dirs, files in os.walk(top):
            below += [Path(folder, name) for name in [*dirs, *files]]
            if len(paths) + len(below) >= limit:
                break
    return (paths + below)[:limit]


def readable_as(uid: int, gid: int, paths: list[Path], python: str = sys.executable) -> list[str]:
    """The paths that `uid`:`gid` can open or list; the probe's own failure counts as one."""
    if not paths:
        return []
    try:
        proc = subprocess.run(
            [python, "-I", "-S", "-c", PROBE, *map(str, paths)],
            user=uid,
            group=gid,
            extra_groups=[],
            env={},
            cwd="/",
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return [f"(unchecked: the probe could not run as uid {uid}: {exc})"]
    if proc.returncode != 0:
        return [f"(unchecked: the probe as uid {uid} exited {proc.returncode}: {proc.stderr.strip()[-300:]})"]
    return [line for line in proc.stdout.splitlines() if line]


def refuse_if_exposed(hide: list[Path], uid: int, gid: int) -> None:
    """Raise HiddenPathsExposed when the worker's user can read any hidden path."""
    exposed = readable_as(uid, gid, probe_paths(hide))
    if exposed:
        shown = ", ".join(exposed[:5]) + (f" and {len(exposed) - 5} more" if len(exposed) > 5 else "")
        raise HiddenPathsExposed(
            f"refusing to grade: without a mount namespace (isolation level uid) the worker's user {uid} can read "
            f"{shown}, so hidden cases, the reference or the results would be open to the submission. Make them "
            "readable by root only (chmod -R go= PATH; the Gradescope package does this itself before grading)"
        )
