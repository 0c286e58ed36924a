from __future__ import annotations

import pytest

from grader.engine.orchestrator import trace


def test_spans_print_only_when_asked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GRADER_TRACE", raising=False)
    with trace.span("gelu", "correctness"):
        pass
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("GRADER_TRACE", "1")
    with trace.span("gelu", "correctness"):
        pass
    trace.note(1.5, "gelu", "case-a", "in the worker")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[trace]") and lines[0].endswith("gelu correctness")
    assert lines[1] == "[trace]    1.500 s  gelu case-a in the worker"


def test_a_span_still_reports_when_its_body_raises(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GRADER_TRACE", "1")
    with pytest.raises(ValueError):
        with trace.span("matmul", "expected"):
            raise ValueError("boom")
    assert "matmul expected" in capsys.readouterr().err


def test_a_forged_duration_is_skipped_not_trusted(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The worker reports its call's duration; a submission that forges the reply must not crash the grader."""
    for enabled in ("", "1"):
        monkeypatch.setenv("GRADER_TRACE", enabled)
        for forged in ("soon", None, [1.0], {"s": 1}):
            trace.note(forged, "gelu", "case", "in the worker")
    assert capsys.readouterr().err == ""
