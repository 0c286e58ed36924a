"""The worker's private folder: its copy of the submission, home, tmp, kernel seed, environment.

The folder is made and handed over by root before the spawn; the environment points the worker's
caches and temp files into it and carries no secret of the grader's.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import NamedTuple

from grader.engine import kernel_cache
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.isolation import IsolationPlan
from grader.engine.spec import versions

SKIP_NAMES = {"__pycache__", ".git", ".ipynb_checkpoints"}


def _copy_submission(src: Path, dst: Path, budget: int) -> list[str]:
    """Copy regular files only, without following links; say what was left out and why.

    Done as root, so a symbolic link would be followed with root's rights: a link named <module>.py
    pointing at reference/<module>.py would hand the reference to the worker. FIFOs and devices
    would block or never end. Neither is copied.
    """
    notes: list[str] = []
    used = 0
    dst.mkdir()
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = Path(dirpath).relative_to(src)
        for name in sorted(dirnames):
            st = os.lstat(os.path.join(dirpath, name))
            if name in SKIP_NAMES or not stat.S_ISDIR(st.st_mode):
                dirnames.remove(name)
                if stat.S_ISLNK(st.st_mode):
                    notes.append(f"left out {rel / name}: a symbolic link")
                continue
            (dst / rel / name).mkdir()
        for name in sorted(filenames):
            where = rel / name
            if name.endswith(".pyc"):
                continue
            try:
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as exc:
                notes.append(f"left out {where}: {'a symbolic link' if exc.errno == errno.ELOOP else exc.strerror}")
                continue
            with os.fdopen(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode):
                    notes.append(f"left out {where}: not a regular file")
                    continue
                if used + st.st_size > budget:
                    notes.append(f"left out {where}: the submission is over {budget >> 20} MiB")
                    continue
                data = f.read(st.st_size + 1)[: st.st_size]
            used += len(data)
            (dst / where).write_bytes(data)
    return notes


def _hand_over_read_only(tree: Path, plan: IsolationPlan) -> None:
    """Give a folder to the worker's uid, readable by it alone and by nobody else."""
    uid, gid = plan.uid, plan.gid
    for dirpath, _dirnames, filenames in os.walk(tree):
        os.chown(dirpath, uid, gid)  # type: ignore[arg-type]
        os.chmod(dirpath, 0o500)
        for name in filenames:
            os.chown(os.path.join(dirpath, name), uid, gid)  # type: ignore[arg-type]
            os.chmod(os.path.join(dirpath, name), 0o400)


class Prepared(NamedTuple):
    copy: Path
    #: what was left out of the copy, and why: shown in the worker's output
    notes: list[str]
    #: the worker starts with kernels compiled by an earlier grading (scratch/seed)
    seeded: bool


def prepare_scratch(
    scratch: Path, submission: Path, config: SandboxConfig, plan: IsolationPlan, kernel_seed: Path | None
) -> Prepared:
    """Copy the submission where only this worker can read it; make its home and tmp."""
    copy = scratch / "submission"
    notes = _copy_submission(submission, copy, config.submission_bytes)
    seeded = False
    for sub in ("home", "tmp", "stage"):
        (scratch / sub).mkdir()
    blocked = scratch / "stage" / "blocked"  # bound over hidden files: root-owned, mode 000
    blocked.touch()
    os.chmod(blocked, 0)
    seed = scratch / "seed"
    if kernel_seed is not None and kernel_seed.is_dir():
        # this submission's kernels compiled by an earlier grading
        seeded = kernel_cache.copy_tree(kernel_seed, seed).files > 0
        kernel_cache.touch(kernel_seed)  # used: the last to be evicted
    if plan.uid is None:
        return Prepared(copy, notes, seeded)
    # root-owned scratch others may cross but not list; the rest belongs to the worker alone
    os.chmod(scratch, 0o711)
    os.chmod(scratch / "stage", 0o700)
    for tree in (copy, seed) if seeded else (copy,):
        _hand_over_read_only(tree, plan)
    for sub in ("home", "tmp"):
        os.chown(scratch / sub, plan.uid, plan.gid)  # type: ignore[arg-type]
        os.chmod(scratch / sub, 0o700)
    return Prepared(copy, notes, seeded)


def worker_env(config: SandboxConfig, scratch: Path, token: str, seeded: bool) -> dict[str, str]:
    """The worker's whole environment: its folders, the few variables CUDA needs, no secret."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(scratch / "home"),
        "TMPDIR": str(scratch / "tmp"),
        "TRITON_CACHE_DIR": str(scratch / "home" / ".triton"),
        # the worker's uid may have no passwd entry: getpass (used by torch's inductor caches)
        # reads these first instead of failing on getpwuid
        "USER": "grader-worker",
        "LOGNAME": "grader-worker",
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "home" / ".inductor"),
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4"),
        "GRADER_WORKER_TOKEN": token,
        "NCCL_NVLS_ENABLE": "0",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    }
    if seeded:
        env["GRADER_KERNEL_SEED"] = str(scratch / "seed")
    for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH"):
        if key in os.environ:
            env[key] = os.environ[key]
    if config.device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    env.update(versions.worker_env(versions.graded()))  # the namespace hides assignment/; extra_env may name another
    env.update(config.extra_env)
    return env
