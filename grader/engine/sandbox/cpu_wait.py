"""How long a worker waited for a CPU that other processes held, from Linux's scheduler statistics.

A problem's clock charges its worker's calls, and on a machine shared with other gradings (or CI's
two cores running two test processes) a call that is ready to run can wait for a CPU for minutes:
that wait is the machine's, not the submission's. Linux counts it per thread
(`/proc/<pid>/schedstat`: time on a CPU, time runnable but waiting on a run queue), and counts the
CPU time of all of a process's threads (`/proc/<pid>/stat`).

What is excused is the main thread's run-queue wait, but never more than the part of the wall time
the worker's own threads did not spend on a CPU: a submission that starts busy threads of its own
to crowd its main thread uses the CPU the whole time, so it is excused nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    """One reading of a process: seconds since it began."""

    waited: float  # its main thread's time runnable but not running (others held the CPUs)
    used: float  # CPU time of all its threads (user and system)


def sample(pid: int) -> CpuSample | None:
    """The process's reading now, or None where Linux does not give it (gone, no schedstat)."""
    try:
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            waited_ns = int(f.read().split()[1])
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5), after "pid (comm)"
    except (OSError, IndexError, ValueError):
        return None
    return CpuSample(waited=waited_ns / 1e9, used=(utime + stime) * _TICK_S)


def excusable(wall: float, first: CpuSample, now: CpuSample) -> float:
    """Seconds of `wall` (between the two readings) that were the machine's: the main thread's wait
    for a CPU, at most the wall time the process's threads were not running."""
    waited = now.waited - first.waited
    idle = wall - (now.used - first.used)
    return max(min(waited, idle), 0.0)
