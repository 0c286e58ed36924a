"""Rich tables for the terminal: one submission's problems, or a whole batch."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from grader.engine.records.model import Phases, Result, ShapeProfile, TestResult
from grader.engine.records.text import printable

STYLE = {"passed": "green", "partial": "yellow", "failed": "red", "error": "red", "skipped": "dim"}


def _pts(x: float | None) -> str:
    return "-" if x is None else f"{round(x, 2):g}"


def print_result(result: Result, console: Console) -> None:
    table = Table(title=f"{result.submission.student or result.submission.path}  ({result.environment.device})")
    for col in ("problem", "status", "tests passed", "performance", "score"):
        table.add_column(col)
    for p in result.problems:
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
            passed_cell(p.tests),
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


def passed_cell(tests: list[TestResult]) -> str:
    """The table's "tests passed" cell; compile-only cases apart, as they check no values."""
    graded = [t for t in tests if t.max_score > 0]
    checked = [t for t in graded if not t.compile_only]
    compiled = [t for t in graded if t.compile_only]
    text = f"{sum(t.status == 'passed' for t in checked)} / {len(checked)}"
    if compiled:
        text += f" + {sum(t.status == 'passed' for t in compiled)} / {len(compiled)} compile-only"
    return text


def first_reasons(result: Result) -> list[str]:
    """Each problem that did not pass, with the first line of its first reason: the terminal's
    answer, where the full messages are in the report behind a login."""
    lines = []
    for p in result.problems:
        if p.status in ("passed", "skipped"):
            continue
        failing = [t for t in p.tests if t.status in ("failed", "error") and t.message.strip()]
        reason = p.message.strip() or (failing[0].message.strip() if failing else "")
        where = f" ({failing[0].name})" if failing and not p.message.strip() else ""
        first = reason.splitlines()[0][:300] if reason else "no message"
        lines.append(f"{p.name}: {p.status}{where}: {first}")
    return lines


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
    from grader.engine.records.flags import labels

    marks = labels(result) if result.status == "graded" else ""
    return (
        f"[{done}/{total}] {printable(student)}: {text}"
        + (f"; flags: {marks}" if marks else "")
        + f" ({result.duration_s:.1f} s)"
    )


def phase_totals(results: list[Result]) -> dict[str, float]:
    """Seconds the class's gradings spent per phase (their problems' `phases`, summed), and the count."""
    totals = {"gradings": float(len(results)), **dict.fromkeys(Phases.model_fields, 0.0)}
    for result in results:
        for problem in result.problems:
            if problem.phases is not None:
                for key, value in problem.phases.model_dump().items():
                    totals[key] += value
    return {k: round(v, 1) for k, v in totals.items()}


def phase_line(totals: dict[str, float]) -> str:
    """Where the class's time went, in one line (worker start-up is part of correctness)."""
    return (
        f"time spent over {totals['gradings']:.0f} grading(s), summed over problems: correctness "
        f"{totals['correctness_s']:.0f} s (of it worker start-up {totals['worker_start_s']:.0f} s), first calls "
        f"at the benchmark shapes {totals['warm_s']:.0f} s, timing {totals['timing_s']:.0f} s (alone on the GPU), "
        f"timed rounds checked {totals['checks_s']:.0f} s, waiting for the GPU {totals['gpu_wait_s']:.0f} s"
    )


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def print_timings(result: Result, console: Console) -> None:
    """Each benchmark shape: the student's and the reference's time, the ratio and its interval,
    and the performance points it earns (what `grader submit --mode benchmark` shows)."""
    table = Table(title="benchmark (ratio = reference time / your time; higher is faster)")
    for col in ("problem", "shape", "yours (ms)", "reference (ms)", "ratio", "95% interval", "points"):
        table.add_column(col)
    for p in result.problems:
        perf = p.performance
        if perf is None or not perf.shapes:
            reason = "" if perf is None else f"{perf.status.replace('_', ' ')}: {perf.reason}"
            table.add_row(p.name, "", "", "", "", "", escape(reason or "not timed"))
            continue
        for n, shape in enumerate(perf.shapes):
            interval = "" if shape.ratio_low is None else f"{shape.ratio_low:.3f} – {shape.ratio_high:.3f}"
            points = f"{_pts(perf.score)} / {_pts(perf.max_score)}" if n == 0 else ""
            table.add_row(
                p.name if n == 0 else "",
                escape(shape.name),
                _ms(shape.student_ms),
                _ms(shape.reference_ms),
                "-" if shape.ratio is None else f"{shape.ratio:.3f}",
                interval,
                points,
            )
    console.print(table)


def print_profiles(result: Result, console: Console) -> None:
    """Each profiled shape (`--profile`): its kernels, the longest first, with their share of the
    call's GPU time (what `grader submit --mode profile` shows)."""
    for p in result.problems:
        for shape in p.profile:
            table = Table(
                title=f"{escape(p.name)} {escape(shape.name)}: one warm call, {shape.wall_ms:.4g} ms on the host "
                f"clock, {shape.kernels_ms:.4g} ms in GPU kernels"
            )
            for col in ("kernel", "launches", "GPU ms", "share"):
                table.add_column(col)
            if shape.error:
                table.add_row(escape(shape.error), "", "", "")
            for k in shape.kernels:
                share = f"{100 * k.time_ms / shape.kernels_ms:.0f}%" if shape.kernels_ms > 0 else "-"
                table.add_row(escape(k.name), str(k.calls), f"{k.time_ms:.4g}", share)
            console.print(table)
            print_counters(shape, console)


def _shown(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def print_counters(shape: ShapeProfile, console: Console) -> None:
    """Nsight Compute's counters of the profiled call, or why there are none."""
    if not shape.counters:
        if shape.counters_note:
            console.print(escape(shape.counters_note))
        return
    table = Table(title="Nsight Compute, the same call: each kernel against the GPU's ceilings")
    for col in ("kernel", "launches", "GPU ms", "SM %", "memory %", "DRAM GB/s", "occupancy %", "registers"):
        table.add_column(col)
    for k in shape.counters:
        table.add_row(
            escape(k.name),
            str(k.launches),
            f"{k.time_ms:.4g}",
            _shown(k.sm_pct, ".0f"),
            _shown(k.memory_pct, ".0f"),
            _shown(k.dram_gb_s, ".0f"),
            _shown(k.occupancy_pct, ".0f"),
            _shown(k.registers, "d"),
        )
    console.print(table)
