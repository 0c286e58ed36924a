"""WorkerProcess: one sandboxed worker process for one problem, from spawn to close.

It starts the worker (grader/engine/harness/serve.py) with a fresh interpreter, greets it, sends it requests
under the problem's deadline, pauses it while something else is timed, and stops it: whatever the
worker does, every call returns by its deadline and nothing it started outlives close().
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from grader.engine import protocol
from grader.engine.sandbox import bytecode, exit_reason, exposure, kernel_copy, processes, reply_wait, seccomp
from grader.engine.sandbox.child import SPAWN_LOCK, child_setup, preexec
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.output import CapturedStream, combined
from grader.engine.sandbox.plan import GRADER_ROOT, blocked_ancestor, plan_isolation, runtime_paths
from grader.engine.sandbox.scratch import prepare_scratch, worker_env
from grader.engine.sandbox.syscalls import load_libc
from grader.engine.sandbox.uids import UidLease, lease_uid

# nothing but `sys` is bound in the worker's __main__: the harness is not one attribute away
BOOTSTRAP = (
    "import sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "__import__('grader.engine.harness.serve')\n"
    "del sys.path[0]\n"
    "sys.exit(sys.modules['grader.engine.harness.serve'].main(sys.argv[1:]))\n"
)
EXIT_GRACE_S = 1.0
#: asked while a call waits for its reply: the seconds to add to the call's deadline
Waiting = Callable[[], float]
PAUSE_WAIT_S = 1.0  # how long pause() waits for every process of a worker to show it stopped


class WorkerDied(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class WorkerTimeout(Exception):
    pass


class WorkerUnavailable(RuntimeError):
    """No worker could be started: the grading machine's fault, never the submission's (none of its
    code has run yet). It stops the grading, which becomes an infrastructure error row, retried."""


class WorkerProcess:
    """One worker process for one problem of one submission."""

    def __init__(
        self,
        config: SandboxConfig,
        submission: Path,
        problem: str,
        module: str,
        function: str,
        kernel_seed: Path | None = None,
    ) -> None:
        self.config = config
        self.kernel_seed = kernel_seed
        self.seeded = False
        self.token = secrets.token_hex(8)
        self.notes: list[str] = []
        self.lease: UidLease | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.imported = False  # its first word (protocol.Imported) read
        self.ready = False  # told to go on, and its submission imported (protocol.Ready)
        self.scratch = Path(tempfile.mkdtemp(prefix="grader-worker-"))
        try:
            if os.geteuid() == 0 and config.private_uid:
                self.lease = lease_uid()
            uid = self.lease.uid if self.lease else None
            self.plan = plan_isolation(config, uid=uid, gid=uid)
            self.plan.private_uid = self.lease is not None
            if config.scope is not None:
                config.scope.add(self.token, self.plan)
            self._spawn(submission, problem, module, function)
            if config.scope is not None and self.proc is not None:
                config.scope.started(self.token, self.proc.pid)
        except OSError as exc:
            self._cleanup()
            raise WorkerUnavailable(f"the worker could not be started: {exc}") from None
        except BaseException:
            self._cleanup()
            raise

    @property
    def isolation(self) -> str:
        """The level, and what is missing from it: recorded as `environment.isolation`."""
        if seccomp.available():
            return self.plan.level
        return f"{self.plan.level}, without the seccomp filter (the worker may make namespaces and mounts)"

    def _spawn(self, submission: Path, problem: str, module: str, function: str) -> None:
        copy, notes, self.seeded = prepare_scratch(self.scratch, submission, self.config, self.plan, self.kernel_seed)
        self.notes += notes
        load_libc()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        argv = [
            sys.executable,
            "-I",
            *bytecode.worker_flags(self.plan.uid, namespace=self.plan.level == "namespace"),
            "-c",
            BOOTSTRAP,
            str(GRADER_ROOT),
            "--submission",
            str(copy),
            "--problem",
            problem,
            "--module",
            module,
            "--function",
            function,
            "--device",
            self.config.device,
            "--req-fd",
            str(req_r),
            "--rep-fd",
            str(rep_w),
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
                blocked = [b for b in map(blocked_ancestor, runtime_paths()) if b is not None]
                if blocked:
                    raise subprocess.SubprocessError(
                        f"no mount namespace could be made, and without one the worker's user cannot enter "
                        f"{blocked[0]} where Python or its packages live: install them where others may read them"
                    ) from None
                # file modes alone keep this worker from the hidden files: checked, as its uid, first
                exposure.refuse_if_exposed(self.config.hide, self.plan.uid, self.plan.gid)  # type: ignore[arg-type]
                self.proc = self._popen(argv, req_r, rep_w, out_w, err_w)
        except (subprocess.SubprocessError, OSError, exposure.HiddenPathsExposed) as exc:
            for fd in (req_w, rep_r, out_r, err_r):
                os.close(fd)
            if isinstance(exc, exposure.HiddenPathsExposed):
                raise
            raise OSError(f"{exc}") from None
        finally:
            for fd in (req_r, rep_w, out_w, err_w):
                os.close(fd)
        self.req, self.rep = req_w, rep_r
        self.stdout = CapturedStream(out_r, self.config.output_bytes)
        self.stderr = CapturedStream(err_r, self.config.output_bytes)

    def _popen(self, argv: list[str], req_r: int, rep_w: int, out_w: int, err_w: int) -> subprocess.Popen[bytes]:
        with SPAWN_LOCK:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                pass_fds=(req_r, rep_w),
                cwd=str(self.scratch / "tmp"),
                env=worker_env(self.config, self.scratch, self.token, self.seeded),
                start_new_session=True,
                preexec_fn=preexec(child_setup(self.config, self.plan, self.scratch)),
            )

    # -- talking to it --------------------------------------------------------------------------

    def _receive(
        self,
        deadline: float,
        max_blob: int,
        expected: dict[str, type[protocol.Message]],
        waiting: Waiting | None = None,
    ) -> tuple[protocol.Message, bytes]:
        try:
            if waiting is not None:
                deadline = reply_wait.await_reply(self.rep, deadline, waiting)
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

    def wait_imported(self, deadline: float) -> None:
        """The worker's first word (`protocol.Imported`): its imports done, nothing of the submission run."""
        if self.imported:
            return
        self.resume()
        self._receive(deadline, 0, protocol.FIRST)
        self.imported = True

    def wait_ready(self, deadline: float, waiting: Waiting | None = None) -> protocol.Message:
        """Lets the worker go on from its imports (under the GPU's hold, for a grading on a GPU); its
        greeting: `protocol.Ready`, or `protocol.ImportFailed`."""
        self.wait_imported(deadline)
        greeting, _ = self.call(protocol.StartRequest(), b"", deadline, 0, waiting)
        self.ready = isinstance(greeting, protocol.Ready)
        return greeting

    def call(
        self,
        request: protocol.CallRequest
        | protocol.TimeRequest
        | protocol.WarmRequest
        | protocol.LoopRequest
        | protocol.ProfileRequest
        | protocol.StartRequest,
        blob: bytes,
        deadline: float,
        max_blob: int,
        waiting: Waiting | None = None,
    ) -> tuple[protocol.Message, bytes]:
        """Send one request; its reply, one of `request.replies`, and the reply's payload.

        `waiting`, if given, is asked every `reply_wait.WAIT_SLICE_S` until the reply begins, and the seconds
        it returns (the worker stopped meanwhile: its grading stepped aside for a timer) push the
        deadline back."""
        self.resume()
        self._send(request, blob, deadline)
        return self._receive(deadline, max_blob, request.replies, waiting)

    def _send(self, message: protocol.Message, blob: bytes, deadline: float) -> None:
        # a worker that stops reading would block this write forever once the pipe is full: a
        # watchdog kills it at the deadline, which breaks the pipe and ends the write
        watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), self.kill)
        watchdog.daemon = True
        watchdog.start()
        try:
            protocol.send(self.req, message, blob)
        except OSError:
            if time.monotonic() >= deadline:
                raise WorkerTimeout() from None
            raise WorkerDied(self.exit_reason()) from None
        finally:
            watchdog.cancel()

    def exit_reason(self) -> str:
        """Why the worker is gone, with what usually causes it."""
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return "the worker closed its channel but did not exit"
        return exit_reason.described(code)

    def output(self) -> str:
        return combined(self.notes, self.stdout, self.stderr)

    # -- pausing it -----------------------------------------------------------------------------

    def _processes(self) -> list[int]:
        return processes.worker_processes(self.plan, self.token, self.proc)

    def pause(self) -> None:
        """SIGSTOP every process of the worker while something else is timed on the GPU.

        A worker between requests should be idle; a thread or child it left running could load
        the GPU (or the CPU) while the reference or another problem is being timed. Stopped, it
        launches nothing. call() and close() resume it first.
        """
        if self.proc is not None and self.proc.poll() is None and not self.paused:
            processes.signal_all(self._processes(), signal.SIGSTOP)
            self.paused = True
            # the stop is delivered asynchronously: wait (briefly) until every process shows it
            until = time.monotonic() + PAUSE_WAIT_S
            while time.monotonic() < until and any(
                processes.run_state(p) not in ("T", "t", "Z", "X", "") for p in self._processes()
            ):
                time.sleep(0.002)

    def resume(self) -> None:
        if self.paused:
            processes.signal_all(self._processes(), signal.SIGCONT)
            self.paused = False

    # -- stopping it ----------------------------------------------------------------------------

    def kill(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        processes.sweep(self.plan, self.token, self.proc.pid if self.proc else None)

    def close(self, keep_cache: bool = False) -> kernel_copy.HeldCache | None:
        """Stop the worker. With `keep_cache` its Triton cache outlives it, to be copied once the
        GPU is no longer held alone; the HeldCache then does the cleanup (None: the worker was gone)."""
        held = None
        if keep_cache and self.proc is not None and self.proc.poll() is None:
            try:
                held = kernel_copy.HeldCache(self.proc.pid, self.plan, self.scratch / "home", self._cleanup)
            except OSError:
                held = None
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
        if held is None:
            self._cleanup()
        return held

    def _cleanup(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.config.scope is not None:
            if self.proc is None or not processes.worker_processes(self.plan, self.token, None):
                self.config.scope.closed(self.token)  # else the scope's own sweep keeps at it
        if self.lease is not None:
            self.lease.release()
            self.lease = None
