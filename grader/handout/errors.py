"""A submission's error in `pytest handout`, in a few lines: the case, the student's own frames
(file:line and the line's code), the error and its hint. The interpreter's frames (often 190 lines
of Triton and NumPy between the launch and the `tl.load` that went out of bounds) are left out
unless pytest's `--full-trace` asks for them."""

from __future__ import annotations

import traceback
from pathlib import Path

#: frames of the student's own files shown, innermost last
MAX_FRAMES = 6


def student_frames(error: BaseException, submission: Path) -> list[str]:
    """`file:line in function: code` for each frame of `error`'s traceback in the submission's files."""
    root = submission.resolve()
    frames = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename)
        if path.is_absolute() and path.resolve().is_relative_to(root):
            code = (frame.line or "").strip()
            frames.append(f"  {path.resolve().relative_to(root)}:{frame.lineno} in {frame.name}: {code}")
    return frames[-MAX_FRAMES:]


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and what it was raised from, outermost first (Triton's interpreter raises an
    `InterpreterError` from the error a kernel's line raised)."""
    chain: list[BaseException] = []
    while error is not None and error not in chain:
        chain.append(error)
        error = error.__cause__ or error.__context__
    return chain


def summary(label: str, call: str, error: BaseException, submission: Path, hint: str | None) -> str:
    """What a failed call says: the case, where in the student's code (the launch and, under the
    interpreter, the kernel's own line), the innermost error, the hint."""
    chain = _chain(error)
    frames = list(dict.fromkeys(f for e in chain for f in student_frames(e, submission)))[-MAX_FRAMES:]
    innermost = chain[-1]
    lines = [label, call]
    lines += ["where, in your code (innermost last):", *frames] if frames else []
    lines.append(f"{type(innermost).__name__}: {innermost}")
    if hint:
        lines.append(f"hint: {hint}")
    lines.append("(pytest --full-trace shows every frame, Triton's interpreter included)")
    return "\n".join(lines)
