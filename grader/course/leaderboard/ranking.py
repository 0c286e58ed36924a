"""Who is ranked: one submission per student, the best clean one; flagged ones apart, never ranked.

Students are ranked by total score, then the geometric mean of the per-problem speedups against
the staff reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

from grader.course.leaderboard.inputs import Entry, Warn
from grader.engine.records import flags
from grader.engine.records.model import ProblemResult, Result, geomean


@dataclass
class Selection:
    """Who is ranked, who is flagged, and who has no graded submission at all."""

    ranked: list[Entry]
    flagged: list[Entry]
    failed: list[str]


def flag_reasons(result: Result) -> list[str]:
    """Why a result cannot be ranked: failed kernel checks and timing the grader did not trust."""
    return [f"{f.label}: {f.detail}" for f in flags.of(result) if f.blocking]


def review_reasons(result: Result) -> list[str]:
    """What staff should look at in a ranked result (a speed to review, scan findings): points stand."""
    return [f"{f.label}: {f.detail}" for f in flags.of(result) if not f.blocking]


def problem_speedup(problem: ProblemResult) -> float | None:
    perf = problem.performance
    if perf is None or perf.status != "measured" or not perf.ratio_geomean or perf.ratio_geomean <= 0:
        return None
    return perf.ratio_geomean


def overall_speedup(result: Result) -> float | None:
    """Geometric mean over problems of the per-problem speedup, where it was measured."""
    ratios = [r for r in (problem_speedup(p) for p in result.problems) if r is not None]
    return geomean(ratios) if ratios else None


def timestamp(text: str) -> float:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


def rank_key(result: Result) -> tuple[float, float]:
    """Higher is better: total score, then overall speedup (unmeasured counts as lowest)."""
    speedup = overall_speedup(result)
    return (round(result.score, 4), round(speedup, 4) if speedup is not None else -math.inf)


def select(entries: list[Entry], warn: Warn) -> Selection:
    """One entry per student: the best clean graded submission, else the best flagged one.

    The same submission (sha256) graded again counts once, as its latest grading (a regrade
    supersedes an older run of the same content); a run that failed to grade never replaces
    one that graded.
    """

    def recency(entry: Entry) -> tuple[bool, float]:
        return (entry.result.status == "graded", timestamp(entry.result.graded_at))

    latest: dict[tuple[str, str], Entry] = {}
    for entry in entries:
        key = (entry.student, entry.result.submission.sha256)
        old = latest.get(key)
        if old is None or recency(entry) >= recency(old):
            latest[key] = entry
    owners: dict[str, set[str]] = {}
    for student, sha in latest:
        owners.setdefault(sha, set()).add(student)
    for sha, students in owners.items():
        if len(students) > 1:
            warn(f"identical submission {sha[:12]} under several students: {', '.join(sorted(students))}")

    by_student: dict[str, list[Entry]] = {}
    for entry in latest.values():
        by_student.setdefault(entry.student, []).append(entry)

    def best(candidates: list[Entry]) -> Entry:
        return max(candidates, key=lambda e: (*rank_key(e.result), timestamp(e.result.graded_at)))

    ranked, flagged, failed = [], [], []
    for student in sorted(by_student):
        graded = [e for e in by_student[student] if e.result.status == "graded"]
        clean = [e for e in graded if not flag_reasons(e.result)]
        if clean:
            ranked.append(best(clean))
        elif graded:
            flagged.append(best(graded))
        else:
            failed.append(student)
    return Selection(ranked=ranked, flagged=flagged, failed=failed)
