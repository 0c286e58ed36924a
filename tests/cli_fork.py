"""`grader` and `pytest` command lines run in children forked from one process that has imported
the grader, pytest and PyTorch once.

The corpora grade some 170 submissions through the CLI, each in a process of its own; each of
those spent about 4.5 s of a loaded CI core importing PyTorch and the orchestrator before it
graded anything (docs/gpu-runs/2026-12-07-ci-suite-time.md). Here a server process imports them
once and forks a child per command line: the child is still the real CLI in its own process, with
its own exit code, stdout and stderr, environment, working folder, process id and peak memory,
and it exits through the interpreter's normal shutdown (atexit handlers and finalizers run, as in
a fresh process). Only the imports are shared, and the server imports nothing but modules: no
state of one grading reaches another. `GRADER_TEST_FORK=0` runs a fresh interpreter per command
line instead, as `grader` on a shell would.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: what `grader grade` and `pytest handout` import before they grade (PyTorch through the spec's problems)
PRELOAD = (
    "grader.cli",
    "grader.commands.grade",
    "grader.engine.orchestrator.grade",
    "grader.engine.assignment",
    "pytest",
    "grader.engine.handout.options",
)


@dataclass
class Finished:
    """One command line's end, as subprocess.run would report it."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False

    def grading(self, limit_s: float) -> tuple[int, str]:
        """(exit code, stderr) as the corpora read a grading: -1 and a first line saying so past its limit."""
        if self.timed_out:
            return -1, f"the grading did not finish in {limit_s:g} s\n{self.stderr}"
        return self.returncode, self.stderr


# ---- the server (its own process) ---------------------------------------------------------------


def serve() -> None:
    """Read one JSON request per line on stdin; fork a child for each; report its pid, then its end.

    Single-threaded on purpose: a fork copies only the calling thread, so nothing here may hold a
    lock another thread would need."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    replies = os.dup(1)
    os.write(replies, b'{"ready": true}\n')
    children: dict[int, str] = {}
    pending = b""
    while True:
        readable, _, _ = select.select([0], [], [], 0.05)
        if readable:
            chunk = os.read(0, 1 << 16)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    os.close(replies)
                    _child(request)  # never returns: it exits through SystemExit
                children[pid] = request["id"]
                os.write(replies, json.dumps({"id": request["id"], "pid": pid}).encode() + b"\n")
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            code = os.waitstatus_to_exitcode(status)
            os.write(replies, json.dumps({"id": children.pop(pid), "code": code}).encode() + b"\n")


def run_program(program: str, argv: list[str], rss: str | None) -> int:
    """`grader ARGV` or `pytest ARGV` in this process (a forked child, or a fresh interpreter:
    `FRESH`), its peak memory written to the file `rss` names after it, if any."""
    import resource

    if program == "pytest":
        import pytest

        sys.argv = ["pytest", *argv]
        code = int(pytest.main(argv))
    else:
        from grader.cli import main

        sys.argv = ["grader", *argv]
        code = main(argv)
    if rss:
        Path(rss).write_text(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
    return code


def _child(request: dict) -> None:
    """Become the command line's process: its files, folder and environment, then the CLI."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read TMPDIR again, from this command line's environment
    sys.exit(run_program(request["program"], request["argv"], request.get("rss")))


# ---- the client (the test's process) --------------------------------------------------------------


class ForkedCLI:
    """Runs `grader` command lines through one fork server; safe to call from several threads."""

    def __init__(self, env: dict[str, str]) -> None:
        self._server = subprocess.Popen(
            [sys.executable, "-c", "from tests.cli_fork import serve; serve()"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._server.stdout is not None and self._server.stdin is not None
        first = self._server.stdout.readline()
        if json.loads(first or b"{}").get("ready") is not True:
            raise RuntimeError(f"the CLI fork server did not start (exit {self._server.wait()})")
        self._lock = threading.Lock()
        self._pids: dict[str, Future[int]] = {}
        self._codes: dict[str, Future[int]] = {}
        self._count = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._server.stdout is not None
        for line in self._server.stdout:
            reply = json.loads(line)
            with self._lock:
                target = self._pids if "pid" in reply else self._codes
                future = target.pop(reply["id"])
            future.set_result(reply["pid"] if "pid" in reply else reply["code"])
        with self._lock:  # the server is gone: no answer will come
            for future in [*self._pids.values(), *self._codes.values()]:
                future.set_result(-1)

    def run(
        self,
        argv: list[str],
        *,
        env: dict[str, str],
        cwd: Path,
        timeout: float,
        rss: Path | None = None,
        program: str = "grader",
    ) -> Finished:
        """`PROGRAM ARGV` (grader or pytest) in a forked child; killed (SIGKILL) past `timeout` seconds,
        as subprocess.run does."""
        with self._lock:
            self._count += 1
            key = str(self._count)
            pid_future, code_future = Future[int](), Future[int]()
            self._pids[key], self._codes[key] = pid_future, code_future
        with tempfile.TemporaryDirectory() as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            request = {
                "id": key,
                "program": program,
                "argv": argv,
                "env": env,
                "cwd": str(cwd),
                "stdout": str(out),
                "stderr": str(err),
            }
            if rss is not None:
                request["rss"] = str(rss)
            with self._lock:
                assert self._server.stdin is not None
                self._server.stdin.write(json.dumps(request).encode() + b"\n")
                self._server.stdin.flush()
            pid = pid_future.result()
            timed_out = False
            try:
                code = code_future.result(timeout=timeout)
            except TimeoutError:
                timed_out = True
                if pid > 0:
                    os.kill(pid, signal.SIGKILL)
                code = code_future.result()
            read = lambda p: p.read_text(errors="replace") if p.is_file() else ""  # noqa: E731
            return Finished(code, read(out), read(err), timed_out)

    def close(self) -> None:
        if self._server.stdin is not None:
            self._server.stdin.close()
        self._server.wait(timeout=30)


#: a fresh interpreter's program: `grader` or `pytest`, then the file its peak memory goes to ("" for none)
FRESH = """
import sys
from tests.cli_fork import run_program
sys.exit(run_program(sys.argv[1], sys.argv[3:], sys.argv[2]))
"""


def run(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    via: ForkedCLI | None,
    rss: Path | None = None,
    program: str = "grader",
) -> Finished:
    """`PROGRAM ARGV` through the fork server `via`, or in a fresh interpreter when it is None."""
    if via is not None:
        return via.run(argv, env=env, cwd=cwd, timeout=timeout, rss=rss, program=program)
    command = [sys.executable, "-c", FRESH, program, str(rss or ""), *argv]
    try:
        proc = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, errors="replace"
        )
    except subprocess.TimeoutExpired as exc:
        out, err = (x.decode(errors="replace") if isinstance(x, bytes) else x or "" for x in (exc.stdout, exc.stderr))
        return Finished(-1, out, err, timed_out=True)
    return Finished(proc.returncode, proc.stdout, proc.stderr)


def forking() -> bool:
    """Whether command lines go through the fork server (GRADER_TEST_FORK=0: a fresh interpreter each)."""
    return os.environ.get("GRADER_TEST_FORK", "1") != "0"
