"""Starting, limiting and stopping the untrusted worker process.

Isolation, strongest first, as far as the machine allows (the level used is recorded in result.json):

- "namespace": the grader runs as root and may create a mount namespace. The worker gets a
  private mount table in which the reference, the hidden cases, the results folder and anything
  else named in `hide` are covered by empty, unreadable tmpfs mounts (files by /dev/null), then
  drops to an unprivileged user. Python installs that live under a folder the user could not
  enter (say /root/.pyenv) are re-exposed read-only-by-permission through the same namespace.
- "uid": root, but no mount namespace (for example inside Docker without CAP_SYS_ADMIN): the
  worker still drops to the unprivileged user, and the image keeps secrets readable by root only.
- "none": the grader is not root (a student grading their own work): limits and the process
  boundary only.

In every level the worker is spawned with a fresh interpreter (never forked from the
orchestrator), gets an environment with no secret in it, its own session and process group, and
rlimits on CPU time, address space (CPU grading only: CUDA reserves more virtual memory than any
sane limit), processes, file size and core dumps.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import protocol

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 0x1000, 0x2000, 0x4000, 0x40000

# the profiler's own log lines (kineto prints them whatever its log level): not the student's output
PROFILER_NOISE = re.compile(r"^(USDT|INFO|WARNING):\d{4}-\d\d-\d\d [\d:]+ \d+:\d+ \S+\.cpp:\d+\]")
GRADER_ROOT = Path(__file__).resolve().parent.parent
BOOTSTRAP = (
    "import sys; root = sys.argv.pop(1); sys.path.insert(0, root); "
    "from grader.worker import main; sys.path.remove(root); sys.exit(main(sys.argv[1:]))"
)


@dataclass
class SandboxConfig:
    device: str
    hide: list[Path] = field(default_factory=list)
    worker_user: str = "nobody"
    memory_bytes: int | None = 8 << 30
    cpu_seconds: int = 600
    max_processes: int = 1024
    max_file_bytes: int = 256 << 20
    output_bytes: int = 64 << 10
    extra_env: dict[str, str] = field(default_factory=dict)


class CapturedStream:
    """Drains a pipe in a thread, keeping the first `limit` bytes and counting the rest."""

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
            room = self.limit - len(self.kept)
            self.kept += chunk[: max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)
        os.close(self.fd)

    def text(self) -> str:
        self.thread.join(timeout=2)
        body = self.kept.decode("utf-8", errors="replace")
        return body + (f"\n[... {self.dropped} more bytes not kept]" if self.dropped else "")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _mount(libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _blocked_ancestor(path: Path) -> Path | None:
    """The highest ancestor of `path` that others may not enter, if any."""
    blocked = None
    for parent in reversed(path.parents):
        try:
            if not os.stat(parent).st_mode & 0o001:
                return parent
        except OSError:
            return blocked
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


@dataclass
class IsolationPlan:
    level: str
    uid: int | None = None
    gid: int | None = None
    hide: list[Path] = field(default_factory=list)
    expose: dict[Path, list[Path]] = field(default_factory=dict)
    stage: Path | None = None


def plan_isolation(config: SandboxConfig, want_namespace: bool = True) -> IsolationPlan:
    if os.geteuid() != 0:
        return IsolationPlan("none")
    user = pwd.getpwnam(config.worker_user)
    plan = IsolationPlan("namespace" if want_namespace else "uid", uid=user.pw_uid, gid=user.pw_gid)
    if want_namespace:
        plan.hide = [p.resolve() for p in config.hide if p.exists()]
        for needed in runtime_paths():
            blocked = _blocked_ancestor(needed)
            if blocked is not None:
                plan.expose.setdefault(blocked, []).append(needed)
    return plan


def _apply_namespace(plan: IsolationPlan) -> None:
    """Runs in the child, as root, before it drops privileges. Raises if anything fails."""
    libc = _libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNS): {os.strerror(err)}")
    _mount(libc, None, "/", None, MS_REC | MS_PRIVATE, None)
    assert plan.stage is not None
    i = 0
    for blocked, needed in plan.expose.items():
        staged = []
        for path in needed:
            stage = plan.stage / f"s{i}"
            i += 1
            _mount(libc, str(path), str(stage), None, MS_BIND | MS_REC, None)
            staged.append((stage, path))
        _mount(libc, "tmpfs", str(blocked), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
        for stage, path in staged:
            os.makedirs(path, exist_ok=True)
            _mount(libc, str(stage), str(path), None, MS_MOVE, None)
    for path in plan.hide:
        if not path.exists():  # already out of sight behind an exposed folder's tmpfs
            continue
        if path.is_dir():
            _mount(libc, "tmpfs", str(path), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k")
        else:
            _mount(libc, str(plan.stage / "blocked"), str(path), None, MS_BIND, None)


def _preexec(plan: IsolationPlan, config: SandboxConfig) -> Any:
    def setup() -> None:
        limits = [
            (resource.RLIMIT_CPU, config.cpu_seconds),
            (resource.RLIMIT_FSIZE, config.max_file_bytes),
            (resource.RLIMIT_CORE, 0),
        ]
        if config.memory_bytes and config.device == "cpu":
            limits.append((resource.RLIMIT_AS, config.memory_bytes))
        if plan.uid is not None:
            limits.append((resource.RLIMIT_NPROC, config.max_processes))
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        if plan.level == "namespace":
            _apply_namespace(plan)
        if plan.uid is not None:
            os.setgroups([])
            os.setgid(plan.gid)  # type: ignore[arg-type]
            os.setuid(plan.uid)

    return setup


class WorkerDied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WorkerTimeout(Exception):
    pass


class Worker:
    """One worker process for one problem of one submission."""

    def __init__(self, config: SandboxConfig, submission: Path, problem: str, module: str, function: str) -> None:
        self.config = config
        self.token = secrets.token_hex(8)
        self.scratch = Path(tempfile.mkdtemp(prefix="grader-worker-"))
        self.plan = plan_isolation(config)
        self._spawn(submission, problem, module, function)

    def _env(self) -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.scratch / "home"),
            "TMPDIR": str(self.scratch / "tmp"),
            "TRITON_CACHE_DIR": str(self.scratch / "home" / ".triton"),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4"),
            "GRADER_WORKER_TOKEN": self.token,
            "NCCL_NVLS_ENABLE": "0",
            "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        }
        for key in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH"):
            if key in os.environ:
                env[key] = os.environ[key]
        if self.config.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        env.update(self.config.extra_env)
        return env

    def _prepare_scratch(self, submission: Path) -> Path:
        """Copy the submission where the worker can read it but not change it."""
        copy = self.scratch / "submission"
        shutil.copytree(submission, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".git"), symlinks=False)
        for sub in ("home", "tmp", "stage"):
            (self.scratch / sub).mkdir()
        os.chmod(self.scratch, 0o755)
        for dirpath, dirnames, filenames in os.walk(copy):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        if self.plan.uid is not None:
            for sub in ("home", "tmp"):
                os.chown(self.scratch / sub, self.plan.uid, self.plan.gid)  # type: ignore[arg-type]
        self.plan.stage = self.scratch / "stage"
        blocked = self.plan.stage / "blocked"  # bound over hidden files: root-owned, mode 000
        blocked.touch()
        os.chmod(blocked, 0)
        for i in range(sum(len(v) for v in self.plan.expose.values())):
            (self.plan.stage / f"s{i}").mkdir()
        return copy

    def _spawn(self, submission: Path, problem: str, module: str, function: str) -> None:
        copy = self._prepare_scratch(submission)
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        argv = [
            sys.executable, "-I", "-c", BOOTSTRAP, str(GRADER_ROOT),
            "--submission", str(copy), "--problem", problem, "--module", module, "--function", function,
            "--device", self.config.device, "--req-fd", str(req_r), "--rep-fd", str(rep_w),
        ]
        try:
            try:
                self.proc = self._popen(argv, req_r, rep_w, out_w, err_w)
            except subprocess.SubprocessError:
                if self.plan.level != "namespace":
                    raise
                # no mount namespace here (e.g. a container without CAP_SYS_ADMIN): drop the user only
                self.plan = plan_isolation(self.config, want_namespace=False)
                self.proc = self._popen(argv, req_r, rep_w, out_w, err_w)
        finally:
            for fd in (req_r, rep_w, out_w, err_w):
                os.close(fd)
        self.req, self.rep = req_w, rep_r
        self.stdout = CapturedStream(out_r, self.config.output_bytes)
        self.stderr = CapturedStream(err_r, self.config.output_bytes)

    def _popen(self, argv: list[str], req_r: int, rep_w: int, out_w: int, err_w: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_w,
            stderr=err_w,
            pass_fds=(req_r, rep_w),
            cwd=str(self.scratch / "tmp"),
            env=self._env(),
            start_new_session=True,
            preexec_fn=_preexec(self.plan, self.config),
        )

    # -- talking to it --------------------------------------------------------------------------

    def _receive(self, deadline: float, max_blob: int) -> tuple[dict[str, Any], bytes]:
        try:
            return protocol.recv(self.rep, deadline, max_blob)
        except protocol.Deadline:
            self.kill()
            raise WorkerTimeout() from None
        except protocol.PeerGone:
            raise WorkerDied(self.exit_reason()) from None

    def wait_ready(self, deadline: float) -> dict[str, Any]:
        header, _ = self._receive(deadline, 0)
        return header

    def call(self, header: dict[str, Any], blob: bytes, deadline: float, max_blob: int) -> tuple[dict[str, Any], bytes]:
        try:
            protocol.send(self.req, header, blob)
        except (BrokenPipeError, OSError):
            raise WorkerDied(self.exit_reason()) from None
        return self._receive(deadline, max_blob)

    def exit_reason(self) -> str:
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
        for label, stream in (("stdout", self.stdout), ("stderr", self.stderr)):
            text = "\n".join(line for line in stream.text().splitlines() if not PROFILER_NOISE.match(line)).strip()
            if text:
                parts.append(f"--- {label} ---\n{text}")
        return "\n".join(parts)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._sweep()

    def _sweep(self) -> None:
        """Kill processes the worker left behind, even ones that started a new session."""
        if self.plan.uid is None:
            return
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
                uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
                if uid != self.plan.uid:
                    continue
                if self.token.encode() in (entry / "environ").read_bytes() or os.getpgid(int(entry.name)) == self.proc.pid:
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, StopIteration, ValueError):
                continue

    def close(self) -> None:
        try:
            protocol.send(self.req, {"op": "exit"})
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
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
        shutil.rmtree(self.scratch, ignore_errors=True)

