"""The site's data: one JSON-ready dictionary with the ranking and a table per problem.

The page renders from nothing else, and embeds this same JSON, so the published data and the page
never disagree. Beside the students, each table has marked rows for the staff reference and
PyTorch on each GPU.
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime, timezone
from typing import Any

from grader.course.leaderboard.inputs import Entry
from grader.course.leaderboard.names import display_names
from grader.course.leaderboard.ranking import Selection, overall_speedup, problem_speedup, rank_key
from grader.engine.records import flags
from grader.engine.records.model import ProblemResult, Result, ShapeTiming, geomean

FORMAT_VERSION = 2  # 2: flagged students are a count on the public page; names and reasons on the staff page


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _problem_order(results: list[Result]) -> list[dict[str, Any]]:
    """Problems in first-seen order, largest result first (a subset grading must not reorder)."""
    order: dict[str, dict[str, Any]] = {}
    for result in sorted(results, key=lambda r: -len(r.problems)):
        for p in result.problems:
            order.setdefault(p.name, {"name": p.name, "title": p.title or p.name, "max_score": p.max_score})
    return list(order.values())


def _competition_ranks(keys: list[Any]) -> list[int]:
    """1, 2, 2, 4 ... for keys already sorted best first."""
    ranks: list[int] = []
    for i, key in enumerate(keys):
        ranks.append(ranks[-1] if i and key == keys[i - 1] else i + 1)
    return ranks


def _gpu(result: Result, problem: ProblemResult | None = None) -> str:
    if problem is not None and problem.performance is not None and problem.performance.gpu:
        return problem.performance.gpu
    return result.environment.device


def _perf_text(problem: ProblemResult | None) -> tuple[str, str]:
    """(status shown instead of a speedup, its explanation) for a problem without a measurement."""
    if problem is None:
        return "not graded", ""
    perf = problem.performance
    if perf is None or perf.status == "not_measured":
        return "not measured", perf.reason if perf else ""
    if perf.status == "measured":
        return "measured", ""
    return perf.status.replace("_", " "), perf.reason


#: per GPU and shape: reference ms, PyTorch ms, and achieved rates rescaled to each side
Marks = dict[str, dict[str, dict[str, list[float]]]]


def _add_marks(acc: dict[str, list[float]], s: ShapeTiming) -> None:
    """One student's timing of one shape adds what it saw of the reference and of PyTorch."""
    if s.reference_ms:
        acc["ref_ms"].append(s.reference_ms)
        if s.achieved and s.student_ms:
            acc["ref_achieved"].append(s.achieved * s.student_ms / s.reference_ms)
    if s.pytorch_ms:
        acc["torch_ms"].append(s.pytorch_ms)
        if s.reference_ms:
            acc["torch_speedup"].append(s.reference_ms / s.pytorch_ms)
        if s.achieved and s.student_ms:
            acc["torch_achieved"].append(s.achieved * s.student_ms / s.pytorch_ms)


def _student_cells(problem: ProblemResult, gpu: str, shapes: dict[str, dict[str, Any]], marks: Marks) -> dict[str, Any]:
    """A student's cell per timed shape; the shapes and the marked rows' numbers are gathered on the way."""
    cells: dict[str, dict[str, Any]] = {}
    assert problem.performance is not None
    for s in problem.performance.shapes:
        shapes.setdefault(s.name, {"name": s.name, "case": s.case, "unit": s.achieved_unit})
        if not shapes[s.name]["unit"]:
            shapes[s.name]["unit"] = s.achieved_unit
        cells[s.name] = {"ms": s.student_ms, "speedup": s.ratio, "achieved": s.achieved}
        acc = marks.setdefault(gpu, {}).setdefault(
            s.name, {k: [] for k in ("ref_ms", "torch_ms", "torch_speedup", "ref_achieved", "torch_achieved")}
        )
        _add_marks(acc, s)
    return cells


def _rank_students(students: list[dict[str, Any]]) -> None:
    """By speedup where measured, then (and without any measurement, only) by the problem's score."""

    def key(row: dict[str, Any]) -> tuple[float, float]:
        return (
            round(row["speedup"], 4) if row["speedup"] is not None else -math.inf,
            round(row["score"], 4) if row["score"] is not None else -math.inf,
        )

    students.sort(key=lambda r: (tuple(-k for k in key(r)), r["name"]))
    graded = [r for r in students if r["score"] is not None]
    for row, rank in zip(graded, _competition_ranks([key(r) for r in graded])):
        row["rank"] = rank
    for row in students:
        row.setdefault("rank", None)


def _marked_rows(marks: Marks, order: list[str]) -> list[dict[str, Any]]:
    """The staff reference's and PyTorch's rows per GPU, from the medians of what students' runs saw."""
    several = len(marks) > 1
    marked = []
    for gpu, per_shape in sorted(marks.items()):
        suffix = f" ({gpu})" if several else ""
        ref_cells, torch_cells = [], []
        for s in order:
            acc = per_shape.get(s)
            ref_ms = _median(acc["ref_ms"]) if acc else None
            torch_ms = _median(acc["torch_ms"]) if acc else None
            ref_cells.append(
                {"ms": ref_ms, "speedup": 1.0, "achieved": _median(acc["ref_achieved"])} if acc and ref_ms else None
            )
            torch_cells.append(
                {"ms": torch_ms, "speedup": _median(acc["torch_speedup"]), "achieved": _median(acc["torch_achieved"])}
                if acc and torch_ms
                else None
            )
        torch_ratios = [c["speedup"] for c in torch_cells if c and c["speedup"]]
        common = {"performance": "measured", "note": "", "gpu": gpu}
        if any(ref_cells):
            marked.append(_marked_row("reference", suffix, 1.0, **common, shapes=ref_cells))
        if torch_ratios:
            marked.append(_marked_row("pytorch", suffix, geomean(torch_ratios), **common, shapes=torch_cells))
    return marked


def _problem_table(spec: dict[str, Any], ranked: list[tuple[Entry, str]]) -> dict[str, Any]:
    """Rows for one problem: students, plus the staff reference and PyTorch per GPU (marked rows)."""
    name = spec["name"]
    shapes: dict[str, dict[str, Any]] = {}
    students = []
    marks: Marks = {}
    for entry, shown in ranked:
        problem = next((p for p in entry.result.problems if p.name == name), None)
        speedup = problem_speedup(problem) if problem else None
        status, note = _perf_text(problem)
        gpu = _gpu(entry.result, problem)
        measured = speedup is not None and problem is not None and problem.performance is not None
        cells = _student_cells(problem, gpu, shapes, marks) if measured and problem else {}
        students.append(
            {
                "kind": "student",
                "name": shown,
                "score": problem.score if problem else None,
                "max_score": problem.max_score if problem else spec["max_score"],
                "speedup": speedup,
                "performance": status,
                "note": note,
                "gpu": gpu,
                "cells": cells,
            }
        )
    order = list(shapes)
    for row in students:
        cells = row.pop("cells")
        row["shapes"] = [cells.get(s) for s in order]
    _rank_students(students)
    measured_rows = [r for r in students if r["speedup"] is not None]
    rows = measured_rows + _marked_rows(marks, order)
    rows.sort(key=lambda r: -r["speedup"])
    rows += [r for r in students if r["speedup"] is None]
    return {**spec, "measured": bool(measured_rows), "shapes": [shapes[s] for s in order], "rows": rows}


#: the names of the rows that are not students, by kind
_MARKED_NAMES = {"reference": "staff reference", "pytorch": "PyTorch"}


def _marked_row(kind: str, suffix: str, speedup: float, **rest: Any) -> dict[str, Any]:
    """A row of the staff reference or of PyTorch: unranked and unscored, beside the students."""
    name = _MARKED_NAMES[kind] + suffix
    return {"kind": kind, "rank": None, "name": name, "score": None, "max_score": None, "speedup": speedup, **rest}


def _ranking_row(entry: Entry, rank: int, shown: str, problems: list[dict[str, Any]]) -> dict[str, Any]:
    """A student's row of the overall ranking: totals, then each problem's score and speedup."""
    r = entry.result
    by_name = {p.name: p for p in r.problems}
    return {
        "kind": "student",
        "rank": rank,
        "name": shown,
        "score": r.score,
        "max_score": r.max_score,
        "speedup": overall_speedup(r),
        "problems": [
            {
                "score": by_name[p["name"]].score,
                "max_score": by_name[p["name"]].max_score,
                "speedup": problem_speedup(by_name[p["name"]]),
            }
            if p["name"] in by_name
            else None
            for p in problems
        ],
        "gpu": r.environment.device,
        "graded_at": r.graded_at,
        "review": any(f.kind == "review" for f in flags.of(r)),
    }


def _overall_marked(tables: list[dict[str, Any]], n_problems: int) -> list[dict[str, Any]]:
    """The overall marked rows: the reference is 1.0 by definition; PyTorch is the geomean of its
    per-problem speedups on each GPU."""
    torch_by_gpu: dict[str, list[float]] = {}
    for table in tables:
        for row in table["rows"]:
            if row["kind"] == "pytorch":
                torch_by_gpu.setdefault(row["gpu"], []).append(row["speedup"])
    ref_gpus = sorted({row["gpu"] for t in tables for row in t["rows"] if row["kind"] == "reference"})
    several = len(ref_gpus) > 1
    rows = []
    for gpu in ref_gpus:
        suffix = f" ({gpu})" if several else ""
        common = {"problems": [None] * n_problems, "gpu": gpu, "graded_at": None}
        rows.append(_marked_row("reference", suffix, 1.0, **common))
        if torch_by_gpu.get(gpu):
            rows.append(_marked_row("pytorch", suffix, geomean(torch_by_gpu[gpu]), **common))
    return rows


def build_data(
    selection: Selection,
    *,
    assignment: str,
    versions: list[str],
    title: str | None,
    salt: str | None,
    names: dict[str, str],
    built_at: datetime,
) -> dict[str, Any]:
    """The whole site as one JSON-ready dictionary (the page renders from nothing else)."""
    chosen = selection.ranked + selection.flagged
    results = [e.result for e in chosen]
    shown = display_names(
        [e.student for e in chosen] + selection.failed, salt if salt is not None else assignment, names
    )
    problems = _problem_order(results)

    ordered = sorted(selection.ranked, key=lambda e: (tuple(-k for k in rank_key(e.result)), shown[e.student]))
    ranks = _competition_ranks([rank_key(e.result) for e in ordered])
    ranking = [_ranking_row(entry, rank, shown[entry.student], problems) for entry, rank in zip(ordered, ranks)]
    tables = [_problem_table(p, [(e, shown[e.student]) for e in ordered]) for p in problems]
    ranking += _overall_marked(tables, len(problems))
    return {
        "format": FORMAT_VERSION,
        "title": title or f"{assignment} leaderboard",
        "assignment": {"name": assignment, "versions": versions},
        "built_at": built_at.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "measured": any(row["speedup"] is not None for row in ranking if row["kind"] == "student"),
        "problems": problems,
        "ranking": ranking,
        "tables": tables,
        "flagged": len(selection.flagged),  # who and why: the staff page only
        "not_graded": len(selection.failed),
    }
