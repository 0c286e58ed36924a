"""Rich tables for the terminal: one submission's problems, or a whole batch."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.records.model import Result
from grader.records.text import printable

STYLE = {"passed": "green", "partial": "yellow", "failed": "red", "error": "red", "skipped": "dim"}


def _pts(x: float | None) -> str:
    return "-" if x is None else f"{round(x, 2):g}"


def print_result(result: Result, console: Console) -> None:
    table = Table(title=f"{result.submission.student or result.submission.path}  ({result.environment.device})")
    for col in ("problem", "status", "tests passed", "performance", "score"):
        table.add_column(col)
    for p in result.problems:
        graded = [t for t in p.tests if t.max_score > 0]
        perf = p.performance
        perf_text = (
            ""
            if perf is None
            else (
                f"{_pts(perf.score)} / {_pts(perf.max_score)}"
                if perf.status == "measured"
                else perf.status.replace("_", " ")
            )
        )
        table.add_row(
            p.name,
            f"[{STYLE[p.status]}]{p.status}[/]",
            f"{sum(t.status == 'passed' for t in graded)} / {len(graded)}",
            perf_text,
            f"{_pts(p.score)} / {_pts(p.max_score)}",
        )
    table.add_section()
    table.add_row("total", "", "", "", f"[bold]{_pts(result.score)} / {_pts(result.max_score)}[/]")
    console.print(table)
    if result.pending_note():
        console.print(f"total {_pts(result.score)} / {_pts(result.max_score)}: {result.pending_note()} (not here)")
    for w in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _cell(value: object) -> str:
    """A table cell: blank for a score that does not exist (an ungraded row), never a zero."""
    return "–" if value is None or value == "" else str(value)


def batch_table(rows: list[dict[str, object]], problems: list[str]) -> Table:
    table = Table(title="batch summary")
    for col in ["student", "status", *problems, "total", "flags", "time (s)"]:
        table.add_column(col)
    for row in rows:
        status = str(row.get("status", ""))
        flagged = str(row.get("flags") or "")
        table.add_row(
            escape(printable(str(row["student"]))),
            f"[{'green' if status == 'graded' else 'red'}]{status}[/]",
            *[_cell(row.get(p)) for p in problems],
            _cell(row.get("total")),
            f"[yellow]{escape(flagged)}[/]" if flagged else "",
            _cell(row.get("duration_s")),
        )
    return table


def progress_line(done: int, total: int, student: str, result: Result) -> str:
    """One plain line per finished student, for a batch whose output goes to a log, not a terminal."""
    if result.status == "graded":
        text = f"graded {_pts(result.score)} / {_pts(result.max_score)}"
        text += f" ({result.pending_note()})" if result.pending_note() else ""
    else:
        first = result.error.strip().splitlines()[0] if result.error.strip() else "unknown reason"
        text = f"NOT GRADED ({first[:200]})"
    from grader.judge.flags import labels

    marks = labels(result) if result.status == "graded" else ""
    return (
        f"[{done}/{total}] {printable(student)}: {text}"
        + (f"; flags: {marks}" if marks else "")
        + f" ({result.duration_s:.1f} s)"
    )
