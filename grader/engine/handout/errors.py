"""A submission's error in `pytest handout`, in a few lines: the case, the student's own frames
(file:line and the line's code), the error and its hint. The interpreter's frames (often 190 lines
of Triton and NumPy between the launch and the `tl.load` that went out of bounds) are left out
unless pytest's `--full-trace` asks for them. A process that a problem's code crashed or hung
(grader/engine/handout/isolation.py) is told of the same way: the case, the signal, the student's lines."""

from __future__ import annotations

import traceback
from pathlib import Path

from grader.engine.sandbox import exit_reason

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


def ended(
    problem: str, doing: str, code: int | None, frames: list[traceback.FrameSummary], limit_s: float, submission: Path
) -> str:
    """What a test says when the process running `problem` died (`code`: its exit code, negative for
    a signal) or gave no answer within `limit_s` (`code` None), `doing` the case and call."""
    who = f"the process running {problem}"
    if code is None:
        what = (
            f"no answer within {limit_s:g} s ({problem}'s time limit in the grader): {who} was stopped "
            "(an endless loop, or a kernel that never ends?)"
        )
        graded = "the grader's limit covers all of a problem's cases: there the rest of this problem is not run"
    else:
        what = exit_reason.described(code, who)
        graded = "the grader restarts the problem's worker too: there this case fails the same way"
    where = shown(frames, submission)[-MAX_FRAMES:]
    lines = [doing or f"starting {who}:", what]
    lines += ["where, in your code (innermost last):", *where] if where else ["(no line of your code on its stack)"]
    lines.append(f"({graded}; here the next test gets a fresh process)")
    return "\n".join(lines)
