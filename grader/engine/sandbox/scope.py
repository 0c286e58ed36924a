"""Every process of one grading, ended with the grading whatever happens to the orchestrator.

A worker's close() kills what it started (grader/engine/sandbox/processes.py), but only while the
orchestrator lives: `grader grade` that exits on an error, or that a batch's wall-clock limit
kills (batch/runners.py), left its workers and their daemons running through the next students'
gradings (issue 29). So a grading lists its workers in a scope file before each is spawned (its
uid, whether the uid is its own, the token in its environment, its process group), and:

- a reaper process, started with the scope in a session of its own (a kill of the orchestrator's
  process group misses it) and as the orchestrator's user (a worker's transient uid cannot signal
  it), waits for the end of a pipe whose other end only the orchestrator holds; the kernel closes
  that end however the orchestrator ends, SIGKILL included, and then the reaper sweeps every
  worker the file lists that was not closed;
- `close()`, in grade()'s `finally`, sweeps them itself and says what, if anything, survived;
- a batch runner names the file (GRADER_SCOPE_FILE) and sweeps it after its `grader grade` child
  ends, however it ends, and before the next grading starts in that slot; the gradings of other
  processes on this host leave their files in one folder, locked while they run, and a grading
  that starts sweeps every unlocked one it finds there.

How complete a sweep is depends on the isolation level: with a transient uid (root: `namespace`
and `uid`) every process of that uid is killed, whatever its session, parent or environment;
without one (`none`, or `--worker-user`) the sweep finds processes by the worker's token and
process group, so a process that leaves its group *and* clears its environment escapes, and at
`none` the worker runs as the reaper's own user and could kill it. Why not bubblewrap's
`--unshare-pid --die-with-parent`: its parent-death signal follows the thread that spawned it,
and workers are spawned from a pool's threads that end before the grading does; and it would
have to run before the worker drops its uid and installs the seccomp filter, which refuses it.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grader import ROOT
from grader.engine.sandbox import processes
from grader.engine.sandbox.isolation import IsolationPlan
from grader.engine.sandbox.uids import lock_dir

ENV = "GRADER_SCOPE_FILE"
REAPER = (
    "import sys\nsys.path.insert(0, sys.argv[1])\nfrom grader.engine.sandbox.scope import reap\nreap(sys.argv[2])\n"
)


@dataclass
class Member:
    """One worker as the scope file lists it (later lines about the same token update it)."""

    token: str
    uid: int | None
    gid: int | None
    private: bool
    pgid: int | None = None
    closed: bool = False

    def plan(self) -> IsolationPlan:
        return IsolationPlan("uid" if self.uid is not None else "none", self.uid, self.gid, self.private)

    def alive(self) -> list[int]:
        if self.private and self.uid is not None:
            return processes.process_ids(self.uid)
        return [p for p in processes.tagged_processes(self.plan(), self.token, self.pgid) if p != os.getpid()]


def members(path: Path) -> list[Member]:
    """The workers a scope file lists and their last state; torn or foreign lines are skipped."""
    found: dict[str, Member] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            data = json.loads(line)
            token = data.pop("token")
            known = {k: v for k, v in vars(found[token]).items() if k != "token"} if token in found else {}
            found[token] = Member(token, **{**known, **data})
        except (ValueError, TypeError, KeyError, AttributeError):
            continue
    return list(found.values())


def sweep_file(path: Path) -> list[int]:
    """Kill every process of each worker the file lists that was not closed; the pids that survived."""
    left: list[int] = []
    for member in members(path):
        if not member.closed:
            processes.sweep(member.plan(), member.token, member.pgid)
            left += member.alive()
    return left


def sweep_stale(folder: Path) -> None:
    """Sweep, then remove, the scope files of gradings that ended without closing them."""
    for path in folder.glob("scope-*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held by a grading that still runs
        except OSError:
            os.close(fd)
            continue
        try:
            if not sweep_file(path):
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def reap(path: str) -> None:
    """The reaper's body: wait for the orchestrator's end of the pipe to close, then sweep."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    said = sys.stdin.buffer.read()
    if said != b"done":
        sweep_file(Path(path))


class GradingScope:
    """The scope of one grading: open it before the first worker, close it in a `finally`."""

    def __init__(self) -> None:
        named = os.environ.get(ENV)
        folder = None if named else lock_dir("grader-scopes")
        if folder is not None:
            sweep_stale(folder)
        if named:
            self.path = Path(named)
            sweep_file(self.path)  # a previous attempt's, if the runner did not get to it
        elif folder is not None:
            self.path = folder / f"scope-{os.getpid()}-{secrets.token_hex(4)}"
        else:
            self.path = Path(os.environ.get("TMPDIR", "/tmp")) / f"grader-scope-{secrets.token_hex(8)}"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        self.reaper: subprocess.Popen[bytes] | None = None
        self.statement = ""
        try:
            self.reaper = subprocess.Popen(
                [sys.executable, "-I", "-c", REAPER, str(ROOT), str(self.path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            self.statement = f"no reaper ({exc}): workers end with the orchestrator's own close() only"

    def _write(self, **fields: object) -> None:
        os.write(self._fd, (json.dumps(fields) + "\n").encode())

    def add(self, token: str, plan: IsolationPlan) -> None:
        """A worker about to be spawned (before, so a kill right after the spawn still finds it)."""
        self._write(token=token, uid=plan.uid, gid=plan.gid, private=plan.private_uid)

    def started(self, token: str, pid: int) -> None:
        self._write(token=token, pgid=pid)

    def closed(self, token: str) -> None:
        """The worker was swept by its own close(); its uid may be leased again from now on."""
        self._write(token=token, closed=True)

    def close(self) -> list[int]:
        """Sweep what is still listed, stop the reaper; the pids that survived (normally none)."""
        left = sweep_file(self.path)
        if self.reaper is not None and self.reaper.stdin is not None:
            try:
                self.reaper.stdin.write(b"done")
                self.reaper.stdin.close()
            except OSError:
                pass
            try:
                self.reaper.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.reaper.kill()
        if not left and not os.environ.get(ENV):
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        return left
