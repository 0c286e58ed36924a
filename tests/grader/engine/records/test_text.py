"""Text a student controls reaches terminals, CSV cells and logs without its control characters."""

from __future__ import annotations

from pathlib import Path

from grader.engine.records import gradebook
from grader.engine.records.console import progress_line
from grader.engine.records.model import AssignmentRef, ProblemResult, Result, RunEnvironment, SubmissionRef, TestResult
from grader.engine.records.text import MAX_OUTPUT, MAX_TEXT, bounded, printable

#: what a hostile archive's name did to a TA's terminal: window title, clipboard (OSC 52), erase
#: the screen, colour, a one-byte CSI (C1), a bell, a carriage return to overwrite the line
HOSTILE = "bob\x1b]0;pwned\x07\x1b]52;c;aGk=\x1b\\\x1b[2J\x1b[31m\x9b2K\x07\rfake,row"


def test_escape_sequences_and_control_characters_go() -> None:
    assert printable(HOSTILE) == "bob2Kfake,row"
    assert printable("\x00\x08\x0b\x0c\x7f\x85") == ""


def test_letters_tabs_and_newlines_stay() -> None:
    honest = "Zoë 中文 naïve\tcol\nline 2"
    assert printable(honest) == honest
    assert printable("windows\r\nline") == "windows\nline"


def _error_row(reason: str) -> Result:
    return Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="x", sha256="0" * 64, student="s"),
        environment=RunEnvironment(device="cpu", torch="", triton="", python="3"),
        score=0.0,
        max_score=15.0,
        duration_s=0.0,
        graded_at="2026-01-01T00:00:00+00:00",
        status="error",
        error=reason,
        error_kind="submission",
        problems=[],
    )


def test_the_record_gradebook_and_console_carry_no_control_characters(tmp_path: Path) -> None:
    result = _error_row(f"bad archive: {HOSTILE}.zip: member '{HOSTILE}.py' is a link")
    assert "\x1b" not in result.error and "\x07" not in result.error
    gradebook.write(tmp_path, [gradebook.row(HOSTILE, result, ["gelu"])], ["gelu"], {})
    for name in ("gradebook.csv", "summary.json"):
        raw = (tmp_path / name).read_bytes()
        assert not any(b < 0x20 and b not in (0x09, 0x0A, 0x0D) for b in raw), name
        assert b"\xc2\x9b" not in raw and b"\x7f" not in raw, name
    text = (tmp_path / "gradebook.csv").read_text()
    assert "pwned" not in text and '"bob2Kfake,row"' in text  # an OSC string goes whole; the rest is kept, quoted
    line = progress_line(1, 1, HOSTILE, result)
    assert printable(line) == line


def test_an_honest_name_is_kept_whole(tmp_path: Path) -> None:
    result = _error_row("bad archive: Zoë-中文.zip is not a zip file")
    gradebook.write(tmp_path, [gradebook.row("Zoë-中文", result, ["gelu"])], ["gelu"], {})
    text = (tmp_path / "gradebook.csv").read_text(encoding="utf-8")
    assert "Zoë-中文" in text and "Zoë-中文.zip is not a zip file" in text


def test_a_long_message_keeps_its_head_and_tail_and_says_how_much_went() -> None:
    text = "head " + "x" * 1_000_000 + " tail"
    cut = bounded(text)
    assert len(cut) <= MAX_TEXT and cut.startswith("head ") and cut.endswith(" tail")
    assert f"[... {len(text) - MAX_TEXT + 64} characters not kept ...]" in cut
    assert bounded("a short message") == "a short message"  # the honest twin: kept whole


def test_a_result_is_bounded_by_the_spec_not_by_the_submission() -> None:
    """Ten 1 MiB failure messages, a 1 MiB output and error: the record stays small, each string cut once."""
    big = "M" * (1 << 20)
    tests = [TestResult(name=f"gelu: case {i}", status="failed", score=0, max_score=1, message=big) for i in range(10)]
    problem = ProblemResult(name="gelu", score=0, max_score=10, status="failed", message=big, tests=tests, output=big)
    result = _error_row(big)
    result.problems = [problem]
    size = len(result.model_dump_json())
    assert size < 12 * MAX_TEXT + MAX_OUTPUT + 10_000, size
    assert len(result.problems[0].output) <= MAX_OUTPUT
    again = Result.model_validate_json(result.model_dump_json())
    assert again.problems[0].tests[0].message == tests[0].message  # a cut text is not cut again
