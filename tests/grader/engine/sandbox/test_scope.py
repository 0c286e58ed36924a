"""A grading's scope (grader/engine/sandbox/scope.py): no worker, and nothing it started, outlives the grading.

The attack of issue 29: a worker starts a daemon (double fork, new session, empty environment),
then the orchestrator dies without closing it (an exception past its handling, or a batch's
wall-clock kill of `grader grade`). Here the orchestrator is a child process that is SIGKILLed
with a live worker; the reaper must end the worker and the daemon. Its honest twin is a grading
whose orchestrator closes normally: the reaper does nothing and the scope file is gone.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import ROOT
from grader.engine.sandbox import scope
from grader.engine.sandbox.isolation import IsolationPlan

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the transient uid's sweep needs root")

DAEMON = """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{token}"], {{}})
    os._exit(0)
os.wait()
def triton_gelu(x):
    return x
"""
ORCHESTRATOR = """
import sys, time
from pathlib import Path
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.process import WorkerProcess
from grader.engine.sandbox.scope import GradingScope
held = GradingScope()
worker = WorkerProcess(SandboxConfig(device="cpu", scope=held), Path(sys.argv[1]), "gelu", "gelu", "triton_gelu")
print(worker.wait_ready(time.monotonic() + 120).status, flush=True)
if sys.argv[2] == "close":
    worker.close()
    print(held.close(), held.path.exists(), flush=True)
else:
    time.sleep(600)
"""


def _mentioning(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _orchestrator(tmp_path: Path, how: str) -> tuple[subprocess.Popen[str], str]:
    token = f"scope-daemon-{secrets.token_hex(4)}"
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "gelu.py").write_text(DAEMON.format(token=token))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(scope.ENV, None)
    proc = subprocess.Popen(
        [sys.executable, "-c", ORCHESTRATOR, str(folder), how], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc, token


def _started(token: str, within_s: float = 20) -> list[int]:
    until = time.monotonic() + within_s
    while not _mentioning(token) and time.monotonic() < until:
        time.sleep(0.1)
    return _mentioning(token)


def _gone(token: str, within_s: float = 20) -> list[int]:
    until = time.monotonic() + within_s
    while _mentioning(token) and time.monotonic() < until:
        time.sleep(0.1)
    return _mentioning(token)


@needs_root
@pytest.mark.slow
def test_a_killed_orchestrators_workers_and_their_daemons_end(tmp_path: Path) -> None:
    proc, token = _orchestrator(tmp_path, "kill")
    assert _started(token), "the daemon did not start"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not _gone(token), "the daemon outlived its orchestrator"


@pytest.mark.slow
def test_a_closed_grading_leaves_no_scope_and_nothing_running(tmp_path: Path) -> None:
    """The honest twin: the orchestrator closes the worker and the scope; nothing survives."""
    proc, token = _orchestrator(tmp_path, "close")
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "[] False"
    proc.wait(timeout=30)
    if os.geteuid() == 0:  # without a transient uid a daemon that clears its environment escapes
        assert not _gone(token, 5)


def test_the_file_lists_each_worker_by_its_last_state(tmp_path: Path) -> None:
    path = tmp_path / "scope"
    lines = [
        {"token": "a", "uid": 5, "gid": 5, "private": True},
        {"token": "b", "uid": None, "gid": None, "private": False},
        {"token": "a", "pgid": 42},
        {"token": "b", "closed": True},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n" + '{"token": "torn", "ui')
    found = {m.token: m for m in scope.members(path)}
    assert set(found) == {"a", "b"}
    assert found["a"] == scope.Member("a", 5, 5, True, pgid=42)
    assert found["b"].closed and found["b"].plan() == IsolationPlan("none", None, None, False)
    assert scope.sweep_file(path / "missing") == []
