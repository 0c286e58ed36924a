"""Why a worker ended, in words a student can act on."""

from __future__ import annotations

import signal

#: what usually kills a worker with SIGSEGV or SIGABRT: a kernel's memory access out of bounds
_MEMORY_HINT = (
    ": usually a kernel's tl.load/tl.store past the end of a tensor, an unmasked access on the last block; "
    "on a GPU an illegal memory access"
)
_HINTS = {
    "SIGSEGV": f" (segmentation fault{_MEMORY_HINT})",
    "SIGABRT": f" (aborted{_MEMORY_HINT})",
    "SIGKILL": " (killed: out of memory or a limit)",
    "SIGXCPU": " (CPU-time limit)",
    "SIGXFSZ": " (file-size limit)",
}


def described(code: int, who: str = "the worker") -> str:
    """A worker's exit status (negative: the signal that killed it) and what usually causes it;
    `who` names the process (`pytest handout` says so of the process running a problem)."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{who} was killed by {name}{_HINTS.get(name, '')}"
    return f"{who} exited with code {code} (sys.exit or os._exit in the submission?)"
