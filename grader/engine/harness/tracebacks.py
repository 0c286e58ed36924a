"""The lines of a submission's own files that an error went through, for the worker's reply and
for `pytest handout` alike. Triton's interpreter raises an `InterpreterError` from the error of
the kernel's own line (the `tl.load` that went out of bounds): the frames of what an error was
raised from count too, or the message would point at the launch alone. And whether an error leaves
the worker fit for another call (`ends_the_worker`)."""

from __future__ import annotations

import traceback
from pathlib import Path

import torch
from triton.runtime.errors import InterpreterError


def chain(error: BaseException | None) -> list[BaseException]:
    """`error` and what it was raised from, outermost first."""
    found: list[BaseException] = []
    while error is not None and all(error is not seen for seen in found):
        found.append(error)
        error = error.__cause__ or error.__context__
    return found


def student_frames(error: BaseException, submission: Path) -> list[traceback.FrameSummary]:
    """The frames of `error`'s chain in the submission's files, outermost first, each place once."""
    root = submission.resolve()
    frames, places = [], set()
    for link in chain(error):
        for frame in traceback.extract_tb(link.__traceback__):
            path = Path(frame.filename)
            place = (frame.filename, frame.lineno, frame.name)
            if path.is_absolute() and path.resolve().is_relative_to(root) and place not in places:
                places.add(place)
                frames.append(frame)
    return frames


def ends_the_worker(exc: BaseException) -> bool:
    """After it, this process's GPU memory or CUDA context cannot be trusted for another call.
    Triton's interpreter's errors never: an out-of-bounds access it caught on the CPU says what a
    GPU would do ("an illegal memory access") but left nothing broken (each such case restarted
    the worker, 5 s a case)."""
    if isinstance(exc, InterpreterError):
        return False
    if isinstance(exc, (torch.OutOfMemoryError, torch.AcceleratorError)):
        return True
    text = str(exc)
    return "CUDA error" in text or "an illegal memory access was encountered" in text


def what_to_show(error: BaseException) -> BaseException:
    """The error a student reads: Triton's interpreter wraps the error of the kernel's own line in
    an InterpreterError, whose text is that error's repr; the one inside is theirs (as `pytest
    handout` shows it: grader.engine.handout.errors)."""
    return chain(error)[-1] if isinstance(error, InterpreterError) else error
