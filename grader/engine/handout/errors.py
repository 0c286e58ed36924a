"""A submission's error in `pytest handout`, in a few lines: the case, the student's own frames
(file:line and the line's code), the error and its hint. The interpreter's frames (often 190 lines
of Triton and NumPy between the launch and the `tl.load` that went out of bounds) are left out
unless pytest's `--full-trace` asks for them."""

from __future__ import annotations

import traceback
from pathlib import Path

#: frames of the student's own files shown, innermost last
MAX_FRAMES = 6


def shown(frames: list[traceback.FrameSummary], submission: Path) -> list[str]:
    """`file:line in function: code` for each of the submission's frames."""
    root = submission.resolve()
    return [
        f"  {Path(f.filename).resolve().relative_to(root)}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
        for f in frames
    ]


def summary(
    label: str,
    call: str,
    frames: list[traceback.FrameSummary],
    innermost: BaseException,
    submission: Path,
    hint: str | None,
) -> str:
    """What a failed call says: the case, where in the student's code (the launch and, under the
    interpreter, the kernel's own line: `grader.engine.harness.tracebacks`), the innermost error, the hint."""
    lines = [label, call]
    where = shown(frames, submission)[-MAX_FRAMES:]
    lines += ["where, in your code (innermost last):", *where] if where else []
    lines.append(f"{type(innermost).__name__}: {innermost}")
    if hint:
        lines.append(f"hint: {hint}")
    lines.append("(pytest --full-trace shows every frame, Triton's interpreter included)")
    return "\n".join(lines)
