"""A problem's own time: charged only while its worker runs one of its requests.

A problem's time limit is the student's, so its clock runs only while the problem's own worker
runs the problem's own calls (the submission imported, each correctness call, the first calls at
the benchmark shapes, each timed request). Nothing else is charged: the worker's start-up imports
(Python, PyTorch, Triton: the machine's time), the grader's own work between calls (inputs,
float64 expected outputs, checks), another problem's calls before this one's, the waits for the
GPU's lease during a call (`excuse`), and the worker's waits for a CPU that other processes held
(`starved`, from Linux's scheduler statistics: CI's two cores shared by two test processes once
stretched an honest interpreted softmax past its limit). A time-out then means the submission's
own calls took the limit, and `account` says which of them took it.

Before this clock, the limit was a wall-clock deadline fixed when the problem began, pushed back
by the waits the grader knew of; a worker spawned at the grading's start then had its imports'
bound run out while an earlier problem slept, and the later problems failed every case with a
"time limit ran out" they never spent (issue 49).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from grader.engine.sandbox import cpu_wait


class ProblemClock:
    """The seconds a problem's own calls have taken, by what took them, against its limit."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        #: seconds charged, by what was running ("case cpu-small-fp32", "worker start", ...)
        self.spent: dict[str, float] = {}
        self._since: float | None = None  # when the request being charged began
        self._left_then = 0.0  # what was left of the limit when it began
        self._excused = 0.0  # waits inside it that are not the problem's (pushed onto its deadline)
        self._label = ""
        #: the worker process whose waits for a CPU are excused (set while it runs)
        self.pid: int | None = None
        #: seconds of CPU waits excused over the problem: at most its limit, so that a worker that
        #: somehow crowds itself cannot run for ever (its wall time stays within twice the limit)
        self.cpu_excused = 0.0
        self._cpu_first: cpu_wait.CpuSample | None = None
        self._cpu_taken = 0.0  # of the request being charged

    @property
    def used(self) -> float:
        running = 0.0 if self._since is None else max(time.monotonic() - self._since - self._excused, 0.0)
        return sum(self.spent.values()) + running

    def left(self) -> float:
        return max(self.limit - self.used, 0.0)

    @property
    def deadline(self) -> float:
        """The time.monotonic() by which the request being charged must end (or, between requests,
        the one a request starting now would have)."""
        if self._since is None:
            return time.monotonic() + self.left()
        return self._since + self._left_then + self._excused

    @contextmanager
    def charging(self, label: str) -> Iterator[None]:
        """Charge the time of what runs inside to `label`; a nested charge is the outer one's."""
        if self._since is not None:
            yield
            return
        self._left_then, self._excused, self._label = self.left(), 0.0, label
        self._since = time.monotonic()
        self._cpu_first, self._cpu_taken = (None if self.pid is None else cpu_wait.sample(self.pid)), 0.0
        try:
            yield
        finally:
            self.starved()
            elapsed = max(time.monotonic() - self._since - self._excused, 0.0)
            self.spent[label] = self.spent.get(label, 0.0) + elapsed
            self._since = None

    def excuse(self, seconds: float) -> None:
        """`seconds` of the request being charged were not the problem's (a wait for the GPU's lease):
        they push its deadline back and are not charged."""
        if self._since is not None and seconds > 0:
            self._excused += seconds

    def starved(self) -> float:
        """Excuse what the request being charged has waited for a CPU since the last ask (see
        `cpu_wait`); the seconds newly excused, which push its deadline back. Asked while a call
        waits for its reply, and once as the charge ends."""
        if self._since is None or self._cpu_first is None or self.pid is None:
            return 0.0
        now = cpu_wait.sample(self.pid)
        if now is None:
            return 0.0
        total = cpu_wait.excusable(time.monotonic() - self._since, self._cpu_first, now)
        more = min(total - self._cpu_taken, self.limit - self.cpu_excused)
        if more <= 0:
            return 0.0
        self._cpu_taken += more
        self.cpu_excused += more
        self._excused += more
        return more

    def account(self, most: int = 4) -> str:
        """Where the problem's own time went, largest first: what a time-out message says."""
        parts = sorted(self.spent.items(), key=lambda item: -item[1])
        said = [f"{label} {seconds:.1f} s" for label, seconds in parts[:most] if seconds >= 0.05]
        rest = sum(seconds for _, seconds in parts[most:])
        if rest >= 0.05:
            said.append(f"the rest {rest:.1f} s")
        waited = ""
        if self.cpu_excused >= 0.05:
            waited = f"; {self.cpu_excused:.1f} s waiting for a CPU others held was not charged"
        return f"its own calls took {self.used:.1f} s of it ({', '.join(said) or 'none'}{waited})"

    def ran_out(self, what: str) -> str:
        """The time-out message: the limit, what was running, where the time went."""
        return f"the problem's time limit of {self.limit:g} s ran out {what}: {self.account()}"
