"""Starting, limiting and stopping the untrusted worker process.

Isolation, strongest first, as far as the machine allows (the level used is recorded in result.json):

- "namespace": the grader runs as root and may create a mount namespace. In the worker's private
  mount table the whole file system is read-only; the grader's own checkout (reference, hidden
  cases, tests, .git) is covered by an empty tmpfs on which only `grader/` and the Python runtime
  are bound back; /tmp, /var/tmp and /dev/shm are fresh private tmpfs (no other worker's scratch
  is visible, nothing written there survives); the results folder, the secret file and anything
  else named in `hide` are covered by unreadable mounts; /proc is a new instance mounted with
  `hidepid=invisible` (Linux 5.8+), so the orchestrator's command line and environment, and every
  other process, are invisible. The worker then drops to a transient user (below).
- "uid": root, but no mount namespace (for example inside Docker without CAP_SYS_ADMIN): the
  worker still drops to a transient user, and the image keeps secrets readable by root only.
- "none": the grader is not root (a student grading their own work): limits, the process
  boundary and the sweep only; the worker can do whatever the user running the grader can.

The transient user: each worker gets a uid (and gid) of its own, drawn from a range no account
uses and reserved with a lock file, so that RLIMIT_NPROC counts that worker's processes alone (a
fork bomb cannot starve another student's worker, as it could if all of them ran as `nobody`),
the worker cannot signal, trace or read the /proc files of any other worker, and the sweep can
kill every process the worker left behind — even ones that called setsid and cleared their
environment — with one `kill(-1, SIGKILL)` issued as that uid. Where no free range is mapped (a
rootless container), the worker runs as `worker_user` instead and the sweep falls back to the
process group and an environment token.

In every level the worker is spawned with a fresh interpreter (never forked from the
orchestrator), gets an environment with no secret in it, its own session and process group, an
OOM score that makes the kernel kill it before anything else, no_new_privs (setuid binaries do
not elevate), a seccomp filter that refuses namespaces and mounts (grader/seccomp.py; where it
cannot be installed, the recorded isolation says so), and rlimits on CPU time, address space (CPU grading only: CUDA reserves more
virtual memory than any sane limit), processes, file size and core dumps. Its stdout and stderr
are drained by threads that keep the first `output_bytes` and count the rest, and every write to
it and read from it is bounded by the problem's deadline, so whatever it does, the grader returns.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import pwd
import random
import re
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader import kernel_cache, protocol, seccomp, versions

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_REC, MS_PRIVATE = 0x1000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS = 38
SYS_MOUNT_SETATTR = 442  # the same number on every architecture (new syscall table)
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 0x1, 0x2

# the profiler's own log lines (kineto prints them whatever its log level): not the student's output
PROFILER_NOISE = re.compile(r"^(USDT|INFO|WARNING):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \S+\.cpp:\d+\]")
GRADER_ROOT = Path(__file__).resolve().parent.parent
# nothing but `sys` is bound in the worker's __main__: the harness is not one attribute away
BOOTSTRAP = (
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "__import__('grader.worker')\n"
    "del sys.path[0]\n"
    "sys.exit(sys.modules['grader.worker'].main(sys.argv[1:]))\n"
)
# world-writable folders that get a private, size-limited tmpfs in the worker's namespace
PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))
TRANSIENT_UIDS = range(1_900_000_000, 1_901_000_000)
SKIP_NAMES = {"__pycache__", ".git", ".ipynb_checkpoints"}
SWEEP_ROUNDS = 20
EXIT_GRACE_S = 1.0
PAUSE_WAIT_S = 1.0  # how long pause() waits for every process of a worker to show it stopped
HELPER_LIMIT_S = 60  # how long the helper that streams a worker's Triton cache may take


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
    #: size of the worker's private home, which holds its Triton cache: the reference's
    #: attention alone compiles 178 MiB of it on the H200 (docs/performance.md)
    home_tmpfs_bytes: int = 1 << 30
    #: the submission copy: files beyond this total are left out (and said so in the output)
    submission_bytes: int = 64 << 20
    #: the worker's share of GPU memory through PyTorch's allocator (advisory: see docs/defenses.md)
    gpu_memory_fraction: float | None = 0.75
    #: a uid per worker rather than `worker_user` (see the module docstring)
    private_uid: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)


class CapturedStream:
    """Drains a pipe in a thread, keeping the first `limit` bytes and counting the rest.

    The rest is read and discarded, never stored: a worker printing a gigabyte costs a gigabyte of
    pipe traffic, not a gigabyte of the grader's memory, and never blocks on a full pipe.
    """

    def __init__(self, fd: int, limit: int) -> None:
        self.fd, self.limit = fd, limit
        self.kept = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            room = max(self.limit - len(self.kept), 0)
            self.kept += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)
        os.close(self.fd)

    def text(self) -> str:
        self.thread.join(timeout=2)
        body = self.kept.decode("utf-8", errors="replace")
        return body + (f"\n[... {self.dropped} more bytes not kept]" if self.dropped else "")


# -- the C library, resolved in the parent so the child only makes system calls ------------------


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("mount", "unshare", "prctl", "syscall", "setns"):
            getattr(libc, name)  # resolve now: no dlsym (and its locks) between fork and exec
        _LIBC = libc
    return _LIBC


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _kernel_at_least(major: int, minor: int) -> bool:
    match = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return bool(match) and (int(match.group(1)), int(match.group(2))) >= (major, minor)


# -- what the worker needs, and who it runs as ---------------------------------------------------


def _blocked_ancestor(path: Path) -> Path | None:
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

    paths = {Path(sys.base_prefix), Path(sys.prefix), Path(os.path.realpath(sys.executable)).parent, GRADER_ROOT / "grader"}
    paths |= {Path(torch.__file__).resolve().parent.parent, Path(triton.__file__).resolve().parent.parent}
    resolved = {p.resolve() for p in paths}
    # keep only outermost folders
    return sorted(p for p in resolved if not any(q != p and q in p.parents for q in resolved))


def _project_root() -> Path | None:
    """GRADER_ROOT when it is the course checkout (reference, hidden cases, .git): a thing to cover."""
    if (GRADER_ROOT / "pyproject.toml").is_file() or (GRADER_ROOT / "assignment").is_dir():
        return GRADER_ROOT
    return None


def _mapped(path: str, ids: range) -> bool:
    """Whether `ids` lies inside one range of this user namespace's uid_map or gid_map."""
    try:
        lines = Path(path).read_text().split("\n")
    except OSError:
        return False
    for line in lines:
        parts = line.split()
        if len(parts) == 3:
            inside, count = int(parts[0]), int(parts[2])
            if inside <= ids.start and ids.stop <= inside + count:
                return True
    return False


def _process_ids(uid: int) -> list[int]:
    """Live (non-zombie) processes whose real, effective, saved or file-system uid is `uid`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as f:
                status = f.read()
        except OSError:
            continue
        state = re.search(r"^State:\s+(\S)", status, re.M)
        uids = re.search(r"^Uid:\s+(.*)$", status, re.M)
        if state and uids and state.group(1) not in "ZX" and str(uid) in uids.group(1).split():
            found.append(int(entry.name))
    return found


class UidLease:
    """A uid (and gid of the same number) that no account owns and no process uses, held by lock."""

    def __init__(self, uid: int, lock_fd: int, lock_path: Path) -> None:
        self.uid = self.gid = uid
        self._fd, self._path = lock_fd, lock_path

    def release(self) -> None:
        if self._fd < 0:
            return
        try:
            self._path.unlink()
        except OSError:
            pass
        os.close(self._fd)
        self._fd = -1


def _lock_dir() -> Path | None:
    """Where leases are held: /run (one place for every grader on the host) or else the temp dir."""
    base = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    folder = base / "grader-uid-locks"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
    except OSError:
        return None
    # somebody else's folder, or one others may write, cannot vouch for a reservation
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return None
    return folder


def _run_state(pid: int) -> str:
    """The process's state letter from /proc (R, S, T, ...), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def lease_uid(pool: range = TRANSIENT_UIDS, attempts: int = 64) -> UidLease | None:
    """Reserve a transient uid for one worker; None where the pool is not mapped or no lock works."""
    if not (_mapped("/proc/self/uid_map", pool) and _mapped("/proc/self/gid_map", pool)):
        return None
    folder = _lock_dir()
    if folder is None:
        return None
    rng = random.SystemRandom()
    for _ in range(attempts):
        uid = rng.randrange(pool.start, pool.stop)
        try:
            pwd.getpwuid(uid)
            continue  # an account has it
        except KeyError:
            pass
        path = folder / str(uid)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            # the holder may have unlinked the file between our open and our lock: then it is stale
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                raise BlockingIOError
        except OSError:
            os.close(fd)
            continue
        if _process_ids(uid):
            os.close(fd)
            continue
        return UidLease(uid, fd, path)
    return None


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


def plan_isolation(config: SandboxConfig, want_namespace: bool = True, uid: int | None = None, gid: int | None = None) -> IsolationPlan:
    """What isolation this machine allows; `uid`/`gid` override `worker_user` (a transient uid)."""
    if os.geteuid() != 0:
        return IsolationPlan("none")
    if uid is None:
        try:
            user = pwd.getpwnam(config.worker_user)
        except KeyError:
            raise RuntimeError(f"the worker user {config.worker_user!r} does not exist on this machine (see --worker-user)") from None
        uid, gid = user.pw_uid, user.pw_gid
    plan = IsolationPlan("namespace" if want_namespace else "uid", uid=uid, gid=gid if gid is not None else uid)
    if want_namespace:
        plan.hide = [p.resolve() for p in config.hide if os.path.lexists(p)]
        plan.keep = runtime_paths()
        covers = {p for p in PRIVATE_TMP if p.is_dir() and not p.is_symlink()}
        root = _project_root()
        if root is not None:
            covers.add(root)
        for needed in plan.keep:
            blocked = _blocked_ancestor(needed)
            if blocked is not None:
                covers.add(blocked)
        # a folder the runtime lives in (or under which it is) cannot be covered
        plan.covers = sorted((c for c in covers if not any(k == c or k in c.parents for k in plan.keep)), key=lambda p: len(p.parts))
        plan.protect_proc = _kernel_at_least(5, 8)
    return plan


# -- the child side: runs between fork and exec ---------------------------------------------------


@dataclass
class _ChildSetup:
    """Everything the child does before exec, computed in the parent (strings and numbers only)."""

    limits: list[tuple[int, int]]
    namespace: bool
    covers: list[tuple[str, list[str]]]
    hide: list[tuple[str, bool]]
    blocked_file: str
    #: (path, size in bytes) of each private, worker-owned tmpfs
    private_tmpfs: list[tuple[str, int]]
    tmpfs_bytes: int
    protect_proc: bool
    uid: int | None
    gid: int | None
    cwd: str
    #: install grader/seccomp.py's filter last (no namespaces, no mounts from here on)
    seccomp: bool = False


def _enter_namespace(setup: _ChildSetup) -> None:
    """Runs in the child, as root, before it drops privileges. Raises if a required step fails."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    blocked_fd = os.open(setup.blocked_file, os.O_PATH | os.O_CLOEXEC)
    # everything read-only (Linux 5.12+); later tmpfs mounts are writable. Older kernels: skipped.
    attr = _MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr))
    small = f"size={min(setup.tmpfs_bytes, 64 << 20)}"
    for cover, keeps in setup.covers:
        if not os.path.isdir(cover):
            continue
        held = [(os.open(k, os.O_PATH | os.O_CLOEXEC), k) for k in keeps if os.path.isdir(k)]
        mode = "1777" if cover in ("/tmp", "/var/tmp", "/dev/shm") else "0755"
        _mount(libc, "tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},{small}")
        for fd, keep in held:
            os.makedirs(keep, exist_ok=True)
            _mount(libc, f"/proc/self/fd/{fd}", keep, None, MS_BIND | MS_REC, None)
            os.close(fd)
    for path, is_dir in setup.hide:
        if not os.path.lexists(path):  # already out of sight under a cover
            continue
        if is_dir:
            _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k")
        else:
            _mount(libc, f"/proc/self/fd/{blocked_fd}", path, None, MS_BIND, None)
    os.close(blocked_fd)
    for path, size in setup.private_tmpfs:
        _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=0700,uid={setup.uid},gid={setup.gid},size={size}")
    if setup.protect_proc:
        try:
            _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
        except OSError:
            pass  # e.g. a container whose /proc has masked paths: processes stay visible (documented)
    # the working directory was entered before the mounts: enter it again, on its private tmpfs
    os.chdir(setup.cwd)


def _as_worker(ns_fd: int, uid: int | None, gid: int | None, filtered: bool) -> Callable[[], None]:
    """Pre-exec of a helper that must act with the worker's credentials alone (save_kernel_cache):
    its mount namespace (when `ns_fd` >= 0), its uid and gid, no_new_privs and the seccomp filter."""

    def run() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (HELPER_LIMIT_S, HELPER_LIMIT_S))
        libc = _libc()
        if ns_fd >= 0 and libc.setns(ns_fd, CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "setns into the worker's mount namespace")
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if uid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)  # type: ignore[arg-type]
            os.setresuid(uid, uid, uid)
        if filtered:
            seccomp.worker_filter().install()

    return run


def _preexec(setup: _ChildSetup) -> Callable[[], None]:
    def run() -> None:
        for which, value in setup.limits:
            resource.setrlimit(which, (value, value))
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # under memory pressure the kernel kills a worker, not the grader
        except OSError:
            pass
        if setup.namespace:
            _enter_namespace(setup)
        _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        if setup.uid is not None:
            os.setgroups([])
            os.setresgid(setup.gid, setup.gid, setup.gid)  # type: ignore[arg-type]
            os.setresuid(setup.uid, setup.uid, setup.uid)
        if setup.seccomp:
            seccomp.worker_filter().install()  # raises: the spawn fails rather than run unfiltered

    return run


# -- the worker -----------------------------------------------------------------------------------


class WorkerDied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WorkerTimeout(Exception):
    pass


def _copy_submission(src: Path, dst: Path, budget: int) -> list[str]:
    """Copy regular files only, without following links; say what was left out and why.

    Done as root, so a symbolic link would be followed with root's rights: a link named gelu.py
    pointing at reference/gelu.py would hand the reference to the worker. FIFOs and devices
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


# Workers of one submission may be started from several threads (problems checked at once):
# forking while another thread forks or sets up a namespace is kept out of the way.
_SPAWN_LOCK = threading.Lock()


class Worker:
    """One worker process for one problem of one submission."""

    def __init__(self, config: SandboxConfig, submission: Path, problem: str, module: str, function: str, kernel_seed: Path | None = None) -> None:
        self.config = config
        self.kernel_seed = kernel_seed
        self.seeded = False
        self.token = secrets.token_hex(8)
        self.notes: list[str] = []
        self.lease: UidLease | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.scratch = Path(tempfile.mkdtemp(prefix="grader-worker-"))
        try:
            if os.geteuid() == 0 and config.private_uid:
                self.lease = lease_uid()
            uid = self.lease.uid if self.lease else None
            self.plan = plan_isolation(config, uid=uid, gid=uid)
            self.plan.private_uid = self.lease is not None
            self._spawn(submission, problem, module, function)
        except OSError as exc:
            self._cleanup()
            raise WorkerDied(f"the worker could not be started: {exc}") from None
        except BaseException:
            self._cleanup()
            raise

    @property
    def isolation(self) -> str:
        """The level, and what is missing from it: recorded as `environment.isolation`."""
        if seccomp.available():
            return self.plan.level
        return f"{self.plan.level}, without the seccomp filter (the worker may make namespaces and mounts)"

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.scratch / "home"),
            "TMPDIR": str(self.scratch / "tmp"),
            "TRITON_CACHE_DIR": str(self.scratch / "home" / ".triton"),
            # the worker's uid may have no passwd entry: getpass (used by torch's inductor caches)
            # reads these first instead of failing on getpwuid
            "USER": "grader-worker",
            "LOGNAME": "grader-worker",
            "TORCHINDUCTOR_CACHE_DIR": str(self.scratch / "home" / ".inductor"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4"),
            "GRADER_WORKER_TOKEN": self.token,
            "NCCL_NVLS_ENABLE": "0",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        }
        if self.seeded:
            env["GRADER_KERNEL_SEED"] = str(self.scratch / "seed")
        for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH"):
            if key in os.environ:
                env[key] = os.environ[key]
        if self.config.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(versions.worker_env(versions.graded()))  # the namespace hides assignment/; extra_env may name another
        env.update(self.config.extra_env)
        return env

    def _prepare_scratch(self, submission: Path) -> Path:
        """Copy the submission where only this worker can read it; make its home and tmp."""
        copy = self.scratch / "submission"
        self.notes += _copy_submission(submission, copy, self.config.submission_bytes)
        for sub in ("home", "tmp", "stage"):
            (self.scratch / sub).mkdir()
        blocked = self.scratch / "stage" / "blocked"  # bound over hidden files: root-owned, mode 000
        blocked.touch()
        os.chmod(blocked, 0)
        seed = self.scratch / "seed"
        if self.kernel_seed is not None and self.kernel_seed.is_dir():
            # this submission's kernels compiled by an earlier grading
            self.seeded = kernel_cache.copy_tree(self.kernel_seed, seed).files > 0
            kernel_cache.touch(self.kernel_seed)  # used: the last to be evicted
        if self.plan.uid is None:
            return copy
        # root-owned scratch others may cross but not list; the rest belongs to the worker alone
        os.chmod(self.scratch, 0o711)
        os.chmod(self.scratch / "stage", 0o700)
        for tree in (copy, seed) if self.seeded else (copy,):
            self._hand_over_read_only(tree)
        for sub in ("home", "tmp"):
            os.chown(self.scratch / sub, self.plan.uid, self.plan.gid)  # type: ignore[arg-type]
            os.chmod(self.scratch / sub, 0o700)
        return copy

    def _hand_over_read_only(self, tree: Path) -> None:
        """Give a folder to the worker's uid, readable by it alone and by nobody else."""
        uid, gid = self.plan.uid, self.plan.gid
        for dirpath, _dirnames, filenames in os.walk(tree):
            os.chown(dirpath, uid, gid)  # type: ignore[arg-type]
            os.chmod(dirpath, 0o500)
            for name in filenames:
                os.chown(os.path.join(dirpath, name), uid, gid)  # type: ignore[arg-type]
                os.chmod(os.path.join(dirpath, name), 0o400)

    def _setup(self) -> _ChildSetup:
        config, plan = self.config, self.plan
        limits = [
            (resource.RLIMIT_CPU, config.cpu_seconds),
            (resource.RLIMIT_FSIZE, config.max_file_bytes),
            (resource.RLIMIT_CORE, 0),
        ]
        if config.memory_bytes and config.device == "cpu":
            limits.append((resource.RLIMIT_AS, config.memory_bytes))
        if plan.uid is not None:
            limits.append((resource.RLIMIT_NPROC, config.max_processes))
        namespace = plan.level == "namespace"
        keep = plan.keep + [self.scratch]
        covers = [(str(c), [str(k) for k in keep if c in k.parents]) for c in plan.covers]
        return _ChildSetup(
            limits=limits,
            namespace=namespace,
            covers=covers,
            hide=[(str(p), p.is_dir()) for p in plan.hide],
            blocked_file=str(self.scratch / "stage" / "blocked"),
            private_tmpfs=[(str(self.scratch / "home"), config.home_tmpfs_bytes), (str(self.scratch / "tmp"), config.tmpfs_bytes)] if namespace else [],
            tmpfs_bytes=config.tmpfs_bytes,
            protect_proc=plan.protect_proc,
            uid=plan.uid,
            gid=plan.gid,
            cwd=str(self.scratch / "tmp"),
            seccomp=seccomp.available(),
        )

    def _spawn(self, submission: Path, problem: str, module: str, function: str) -> None:
        copy = self._prepare_scratch(submission)
        _libc()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        argv = [
            sys.executable, "-I", "-c", BOOTSTRAP, str(GRADER_ROOT),
            "--submission", str(copy), "--problem", problem, "--module", module, "--function", function,
            "--device", self.config.device, "--req-fd", str(req_r), "--rep-fd", str(rep_w),
        ]
        if self.config.device == "cuda" and self.config.gpu_memory_fraction:
            argv += ["--gpu-memory-fraction", str(self.config.gpu_memory_fraction)]
        try:
            try:
                self.proc = self._popen(argv, req_r, rep_w, out_w, err_w)
            except subprocess.SubprocessError:
                if self.plan.level != "namespace":
                    raise
                # no mount namespace here (e.g. a container without CAP_SYS_ADMIN): drop the user only
                self.plan = plan_isolation(self.config, want_namespace=False, uid=self.plan.uid, gid=self.plan.gid)
                self.plan.private_uid = self.lease is not None
                blocked = [b for b in map(_blocked_ancestor, runtime_paths()) if b is not None]
                if blocked:
                    raise subprocess.SubprocessError(
                        f"no mount namespace could be made, and without one the worker's user cannot enter {blocked[0]} "
                        "where Python or its packages live: install them where others may read them"
                    )
                self.proc = self._popen(argv, req_r, rep_w, out_w, err_w)
        except subprocess.SubprocessError as exc:
            for fd in (req_w, rep_r, out_r, err_r):
                os.close(fd)
            raise OSError(f"{exc}") from None
        finally:
            for fd in (req_r, rep_w, out_w, err_w):
                os.close(fd)
        self.req, self.rep = req_w, rep_r
        self.stdout = CapturedStream(out_r, self.config.output_bytes)
        self.stderr = CapturedStream(err_r, self.config.output_bytes)

    def _popen(self, argv: list[str], req_r: int, rep_w: int, out_w: int, err_w: int) -> subprocess.Popen[bytes]:
        with _SPAWN_LOCK:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(req_r, rep_w),
                cwd=str(self.scratch / "tmp"),
                env=self._env(),
                start_new_session=True,
                preexec_fn=_preexec(self._setup()),
            )

    # -- talking to it --------------------------------------------------------------------------

    def _receive(self, deadline: float, max_blob: int, expected: dict[str, type[protocol.Message]]) -> tuple[protocol.Message, bytes]:
        try:
            return protocol.read_reply(self.rep, deadline, max_blob, expected)
        except protocol.Deadline:
            self.kill()
            raise WorkerTimeout() from None
        except protocol.PeerGone:
            if time.monotonic() >= deadline:
                raise WorkerTimeout() from None
            raise WorkerDied(self.exit_reason()) from None
        except protocol.ProtocolError as exc:
            # a worker that breaks the protocol is as good as dead: nothing it sends can be trusted
            self.kill()
            raise WorkerDied(f"the worker broke the grader's protocol ({exc})") from None

    def wait_ready(self, deadline: float) -> protocol.Message:
        """The worker's greeting: `protocol.Ready`, or `protocol.ImportFailed`."""
        self.resume()
        greeting, _ = self._receive(deadline, 0, protocol.GREETING)
        return greeting

    def call(self, request: protocol.CallRequest | protocol.TimeRequest | protocol.LoopRequest, blob: bytes, deadline: float, max_blob: int) -> tuple[protocol.Message, bytes]:
        """Send one request; its reply, one of `request.replies`, and the reply's payload."""
        self.resume()
        # a worker that stops reading would block this write forever once the pipe is full: a
        # watchdog kills it at the deadline, which breaks the pipe and ends the write
        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), self.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            protocol.send(self.req, request, blob)
        except OSError:
            if time.monotonic() >= deadline:
                raise WorkerTimeout() from None
            raise WorkerDied(self.exit_reason()) from None
        finally:
            watchdog.cancel()
        return self._receive(deadline, max_blob, request.replies)

    def exit_reason(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "the worker closed its channel but did not exit"
        if code < 0:
            name = signal.Signals(-code).name
            hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed: out of memory or a limit)", "SIGXCPU": " (CPU-time limit)", "SIGXFSZ": " (file-size limit)"}.get(name, "")
            return f"the worker was killed by {name}{hint}"
        return f"the worker exited with code {code} (sys.exit or os._exit in the submission?)"

    def output(self) -> str:
        parts = []
        if self.notes:
            parts.append("--- grader ---\n" + "\n".join(self.notes))
        for label, stream in (("stdout", self.stdout), ("stderr", self.stderr)):
            text = "\n".join(line for line in stream.text().splitlines() if not PROFILER_NOISE.match(line)).strip()
            if text:
                parts.append(f"--- {label} ---\n{text}")
        return "\n".join(parts)

    # -- its Triton cache ---------------------------------------------------------------------

    def save_kernel_cache(self, dest: Path) -> kernel_cache.Copied | None:
        """Keep the Triton files of the worker's cache (see grader/kernel_cache.py); None if gone.

        The worker is paused first, so nothing changes under the copy. Root never opens a path
        in the worker's cache: `tar`, started as the worker's uid, in the worker's own mount
        namespace (setns) and under the same seccomp filter, reads it without following links
        or leaving its file system, and streams it to kernel_cache.receive, which keeps only
        Triton's own kinds of file within the caps. So the cache can only hold what the worker
        could read itself, whatever it mounted or linked. The least recently used slots are
        evicted afterwards to keep the whole cache under its cap.
        """
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.pause()
        tar = shutil.which("tar", path="/usr/bin:/bin")
        if tar is None:
            return None
        argv = [tar, "--create", "--file=-", "--one-file-system", "--numeric-owner", f"--directory={self.scratch / 'home'}", ".triton"]
        ns_fd = -1
        try:
            if self.plan.level == "namespace":
                ns_fd = os.open(f"/proc/{self.proc.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            _libc()
            with _SPAWN_LOCK:
                helper = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, cwd="/", start_new_session=True,
                    preexec_fn=_as_worker(ns_fd, self.plan.uid, self.plan.gid, seccomp.available()),
                )
        except (OSError, subprocess.SubprocessError):
            return None
        finally:
            if ns_fd >= 0:
                os.close(ns_fd)
        watchdog = threading.Timer(HELPER_LIMIT_S, helper.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            assert helper.stdout is not None
            kept = kernel_cache.keep(lambda folder: kernel_cache.receive(helper.stdout, folder), dest)  # type: ignore[arg-type]
        except OSError:
            return None
        finally:
            watchdog.cancel()
            helper.kill()
            helper.wait()
            helper.stdout.close()  # type: ignore[union-attr]
        kernel_cache.evict(kernel_cache.root_of(dest))
        return kept

    # -- pausing it -----------------------------------------------------------------------------

    def _processes(self) -> list[int]:
        pids = _process_ids(self.plan.uid) if self.plan.private_uid and self.plan.uid is not None else self._tagged_processes()
        if self.proc is not None and self.proc.pid not in pids:
            pids.append(self.proc.pid)
        return [p for p in pids if p != os.getpid()]

    def _signal_all(self, sig: signal.Signals) -> None:
        for pid in self._processes():
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def pause(self) -> None:
        """SIGSTOP every process of the worker while something else is timed on the GPU.

        A worker between requests should be idle; a thread or child it left running could load
        the GPU (or the CPU) while the reference or another problem is being timed. Stopped, it
        launches nothing. call() and close() resume it first.
        """
        if self.proc is not None and self.proc.poll() is None and not self.paused:
            self._signal_all(signal.SIGSTOP)
            self.paused = True
            # the stop is delivered asynchronously: wait (briefly) until every process shows it
            until = time.monotonic() + PAUSE_WAIT_S
            while time.monotonic() < until and any(_run_state(p) not in ("T", "t", "Z", "X", "") for p in self._processes()):
                time.sleep(0.002)

    def resume(self) -> None:
        if self.paused:
            self._signal_all(signal.SIGCONT)
            self.paused = False

    # -- stopping it ----------------------------------------------------------------------------

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._sweep()

    def _kill_as_uid(self) -> None:
        """kill(-1, SIGKILL) as the transient uid: every process it owns, in one system call.

        The kernel walks the process list under a lock that fork must also take, so a fork bomb
        cannot add children during the walk. Run through /bin/sh (always reachable for any uid).
        """
        assert self.plan.uid is not None
        try:
            subprocess.run(
                ["/bin/sh", "-c", "kill -9 -1"],
                user=self.plan.uid, group=self.plan.gid, extra_groups=[],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={}, cwd="/", timeout=10, check=False,
            )
        except (OSError, subprocess.SubprocessError):
            for pid in _process_ids(self.plan.uid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def _tagged_processes(self) -> list[int]:
        """Processes that carry this worker's token in their environment or its process group."""
        found = []
        uid = self.plan.uid if self.plan.uid is not None else os.geteuid()
        for pid in _process_ids(uid):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    tagged = self.token.encode() in f.read()
                if tagged or (self.proc is not None and os.getpgid(pid) == self.proc.pid):
                    found.append(pid)
            except OSError:
                continue
        return found

    def _sweep(self) -> None:
        """Kill what the worker left behind, even processes that started a new session."""
        for round_ in range(SWEEP_ROUNDS):
            if self.plan.private_uid:
                assert self.plan.uid is not None
                if not _process_ids(self.plan.uid):
                    return
                self._kill_as_uid()
            else:
                left = [p for p in self._tagged_processes() if p != os.getpid()]
                if not left:
                    return
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
            time.sleep(0.01 * (round_ + 1))

    def close(self) -> None:
        self.resume()
        if self.proc is not None:
            try:
                # non-blocking: a worker that stopped reading must not hold the grader here
                os.set_blocking(self.req, False)
                protocol.send(self.req, protocol.ExitRequest())
            except OSError:
                pass
            try:
                # a worker at rest exits at once; one that does not is busy with the submission's code
                self.proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            self.kill()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for fd in (self.req, self.rep):
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._cleanup()

    def _cleanup(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.lease is not None:
            self.lease.release()
            self.lease = None
