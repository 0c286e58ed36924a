"""Finding and killing every process of a worker, including those that left its session.

With a private uid, everything that uid owns is the worker's, and one `kill(-1, SIGKILL)` as that
uid ends it all; otherwise the worker's processes are found by its process group and by the
token in their environment.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time

from grader.engine.sandbox.isolation import IsolationPlan

SWEEP_ROUNDS = 20


def process_ids(uid: int) -> list[int]:
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


def run_state(pid: int) -> str:
    """The process's state letter from /proc (R, S, T, ...), or "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return ""


def tagged_processes(plan: IsolationPlan, token: str, pgid: int | None) -> list[int]:
    """Processes that carry this worker's token in their environment or are in its process group."""
    found = []
    uid = plan.uid if plan.uid is not None else os.geteuid()
    for pid in process_ids(uid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                tagged = token.encode() in f.read()
            if tagged or (pgid is not None and os.getpgid(pid) == pgid):
                found.append(pid)
        except OSError:
            continue
    return found


def worker_processes(plan: IsolationPlan, token: str, proc: subprocess.Popen[bytes] | None) -> list[int]:
    """The worker's processes, never the grader's own."""
    pids = (
        process_ids(plan.uid)
        if plan.private_uid and plan.uid is not None
        else tagged_processes(plan, token, proc.pid if proc else None)
    )
    if proc is not None and proc.pid not in pids:
        pids.append(proc.pid)
    return [p for p in pids if p != os.getpid()]


def signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def kill_as_uid(plan: IsolationPlan) -> None:
    """kill(-1, SIGKILL) as the transient uid: every process it owns, in one system call.

    The kernel walks the process list under a lock that fork must also take, so a fork bomb
    cannot add children during the walk. Run through /bin/sh (always reachable for any uid).
    """
    assert plan.uid is not None
    try:
        subprocess.run(
            ["/bin/sh", "-c", "kill -9 -1"],
            user=plan.uid,
            group=plan.gid,
            extra_groups=[],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={},
            cwd="/",
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        signal_all(process_ids(plan.uid), signal.SIGKILL)


def sweep(plan: IsolationPlan, token: str, pgid: int | None) -> None:
    """Kill what the worker left behind, even processes that started a new session."""
    for round_ in range(SWEEP_ROUNDS):
        if plan.private_uid:
            assert plan.uid is not None
            if not process_ids(plan.uid):
                return
            kill_as_uid(plan)
        else:
            left = [p for p in tagged_processes(plan, token, pgid) if p != os.getpid()]
            if not left:
                return
            signal_all(left, signal.SIGKILL)
        time.sleep(0.01 * (round_ + 1))
