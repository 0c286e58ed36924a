"""The processes `pytest handout` runs each problem's cases in, seen from the pytest process.

`grader grade` runs each problem in a worker of its own, so a kernel that segfaults costs its case,
not the grading; `pytest handout` once ran them in the pytest process, and the same kernel ended the
run with exit code 139, no summary, and the other problems untested. Now each problem gets a child
process (grader/engine/handout/child.py), reused across that problem's cases: one that dies fails the test
it was running, with the signal and the submission's frames from the stack faulthandler wrote at
the signal, and the next test gets a fresh one; one that gives no answer within the problem's time
limit is stopped the same way (SIGABRT first, so that its stack says where it was).

The children start fresh, never forked from the pytest process (on a GPU it may hold a CUDA
context): where the platform has one, from multiprocessing's forkserver, a fresh interpreter that
imports torch, Triton and the harness once (`PRELOAD`) and forks each child from there, so a child
costs a fork rather than those imports; elsewhere spawned.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import forkserver
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

#: what the forkserver imports once, for every child it forks: the child's module (torch, Triton,
#: the harness; its student_runtime settings first) and what every child's first correctness call
#: imports (`torch.use_deterministic_algorithms` loads inductor and dynamo: 2-3 s a child)
PRELOAD = ["grader.engine.handout.child", "torch._inductor.config"]
#: after SIGABRT, time for faulthandler to write the stack of a child past its time limit
DUMP_GRACE_S = 10.0
#: a child asked to leave at the end of the session, before it is killed
LEAVE_GRACE_S = 2.0

_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+) in (?P<name>.+?)\s*$')


def context() -> Any:
    """multiprocessing's forkserver, preloaded, where there is one; spawn elsewhere (Windows)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def start_early() -> None:
    """Start the forkserver now, if there is one: its imports (seconds) then run beside pytest's collection."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        context()
        forkserver.ensure_running()


@dataclass(frozen=True)
class Ended:
    """A child that gave no answer: what it was doing, how it ended, and where in the submission."""

    #: its last note: the case's label and the call, or the import
    doing: str
    #: its exit code (negative: the signal), or None when stopped past the time limit
    code: int | None
    frames: list[traceback.FrameSummary] = field(default_factory=list)


def submission_frames(dump: str, submission: Path) -> list[traceback.FrameSummary]:
    """The frames of faulthandler's dump in the submission's files, innermost last, each place once:
    the thread the signal came to, or where it has none of them (a SIGABRT sent from here may land
    on the child's lifeline thread), every thread's."""
    threads = re.split(r"^(?=(?:Current thread|Thread) 0x)", dump, flags=re.MULTILINE)
    current = [block for block in threads if block.startswith("Current thread")]
    return _frames_in("".join(current), submission) or _frames_in(dump, submission)


def _frames_in(dump: str, submission: Path) -> list[traceback.FrameSummary]:
    root, frames, places = submission.resolve(), [], set()
    for line in reversed(dump.splitlines()):  # faulthandler writes the most recent call first
        match = _FRAME.match(line)
        if match is None:
            continue
        path, lineno, name = Path(match["file"]), int(match["line"]), match["name"]
        if path.is_absolute() and path.resolve().is_relative_to(root) and (path, lineno, name) not in places:
            places.add((path, lineno, name))
            frames.append(traceback.FrameSummary(str(path), lineno, name))
    return frames


class ProblemProcess:
    """One problem's child: started at once, asked one request at a time."""

    def __init__(self, name: str, submission: Path, target: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.submission = submission
        handle, path = tempfile.mkstemp(prefix=f"handout-{name}-", suffix=".stack")
        os.close(handle)
        self.crash_log = Path(path)
        ctx, self.closed = context(), False
        self.conn, child_end = ctx.Pipe()
        # never written to: the child ends when this end closes, with pytest or in `close`
        lifeline, self.lifeline = ctx.Pipe(duplex=False)
        self.process = ctx.Process(
            target=target, args=(child_end, lifeline, str(self.crash_log), *args), name=f"handout-{name}", daemon=True
        )
        self.process.start()
        child_end.close()  # the child's death then reads as the end of this pipe
        lifeline.close()

    @property
    def alive(self) -> bool:
        return self.process.is_alive()

    def ask(self, request: Any, limit_s: float) -> Any:
        """The child's answer to `request`, or `Ended` if it died or gave none within `limit_s`."""
        doing, deadline = "", time.monotonic() + limit_s
        try:
            self.conn.send(request)
            while True:
                ready = wait([self.conn, self.process.sentinel], timeout=max(0.0, deadline - time.monotonic()))
                if not ready:
                    return self._stopped(doing)
                if self.conn not in ready:
                    return self._died(doing)
                try:
                    kind, payload = self.conn.recv()
                except (EOFError, OSError):
                    return self._died(doing)
                if kind != "at":
                    return payload
                doing = payload
        except (BrokenPipeError, ConnectionResetError):
            return self._died(doing)
        except BaseException:  # KeyboardInterrupt: no child runs on without its pytest
            self.close()
            raise

    def _died(self, doing: str) -> Ended:
        self.process.join(DUMP_GRACE_S)
        if self.process.exitcode is None:  # its pipe closed, yet it runs on
            self.process.kill()
            self.process.join()
        return Ended(doing, self.process.exitcode, self._frames())

    def _stopped(self, doing: str) -> Ended:
        if os.name == "posix" and self.process.pid is not None:
            os.kill(self.process.pid, signal.SIGABRT)  # faulthandler writes where it was
            self.process.join(DUMP_GRACE_S)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        return Ended(doing, None, self._frames())

    def _frames(self) -> list[traceback.FrameSummary]:
        try:
            dump = self.crash_log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return submission_frames(dump, self.submission)

    def close(self) -> None:
        """End the child (its lifeline closed), kill it if it stays, and drop its stack file."""
        if self.closed:
            return
        self.closed = True
        self.conn.close()
        self.lifeline.close()
        self.process.join(LEAVE_GRACE_S)
        if self.process.exitcode is None:
            self.process.kill()
            self.process.join()
        self.process.close()
        self.crash_log.unlink(missing_ok=True)
