"""A submission's error in `pytest handout` in a few lines (`grader.engine.handout.errors`): the student's
frames only, the error and the hint, and where to find the rest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from grader.engine.handout import errors
from grader.engine.harness import tracebacks


def _summary(label: str, call: str, error: BaseException, submission: Path, hint: str | None) -> str:
    """As the handout's support calls it: the frames and the innermost error from the harness."""
    frames, innermost = tracebacks.student_frames(error, submission), tracebacks.chain(error)[-1]
    return errors.summary(label, call, frames, innermost, submission, hint)


def _raised_in(folder: Path) -> BaseException:
    """An error raised by library code (here: `int`) called from a submission file's function."""
    folder.mkdir()
    (folder / "gelu.py").write_text("def triton_gelu(x):\n    helper = x\n    return int(helper)\n")
    spec = importlib.util.spec_from_file_location("gelu_under_test", folder / "gelu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        module.triton_gelu("not a number")
    except ValueError as exc:
        return exc
    raise AssertionError("no error")


def test_only_the_students_frames_are_shown_with_the_error_and_the_hint(tmp_path: Path) -> None:
    error = _raised_in(tmp_path / "submission")
    text = _summary("square-fp32 [shape=[4]]", "call 1 of 2:", error, tmp_path / "submission", "mask it")
    lines = text.splitlines()
    assert lines[0] == "square-fp32 [shape=[4]]" and lines[1] == "call 1 of 2:"
    assert "  gelu.py:3 in triton_gelu: return int(helper)" in lines
    assert "ValueError: invalid literal for int() with base 10: 'not a number'" in lines
    assert "hint: mask it" in lines and "--full-trace" in lines[-1]
    assert not any("test_errors.py" in line for line in lines)  # the caller's frame is not the student's
    assert len(lines) < 10


def test_an_error_with_no_frame_in_the_submission_still_names_itself(tmp_path: Path) -> None:
    error = _raised_in(tmp_path / "submission")
    text = _summary("case", "call 1 of 1:", error, tmp_path / "elsewhere", None)
    assert "where, in your code" not in text and "ValueError" in text and "hint" not in text


def test_an_error_raised_from_another_shows_both_places_and_the_innermost_error(tmp_path: Path) -> None:
    """Triton's interpreter raises InterpreterError from the error of the kernel's own line."""
    inner = _raised_in(tmp_path / "submission")
    try:
        raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        text = _summary("case", "call 1 of 1:", outer, tmp_path / "submission", None)
    assert "  gelu.py:3 in triton_gelu: return int(helper)" in text
    assert "ValueError: invalid literal" in text and "RuntimeError" not in text
