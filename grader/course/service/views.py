"""What leaves the server: a student's view of their jobs, the public leaderboard, staff's side by side.

The one rule: a `final` job's record (the hidden suite's verdicts, its worker output, even its
state and times, which would tell how long the hidden suite took it) is shown to nobody but
staff until staff publish or the deadline passes, and even then without the worker's
output (a submission can print the hidden cases' shapes: docs/defenses.md). Every page and every
endpoint that shows a job goes through `student_view`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from grader.course.leaderboard.names import display_names
from grader.course.leaderboard.ranking import flag_reasons, overall_speedup, rank_key
from grader.course.service import store
from grader.course.service.quotas import finals_visible, iso
from grader.engine.records.model import Result
from grader.engine.spec.model import Service

#: the only state a student sees of a final until its results may be shown
WITHHELD_STATE = "received"


def result_of(job: store.Job) -> Result | None:
    return None if not job.result else Result.model_validate_json(job.result)


def visible_result(job: store.Job, service: Service, published: float | None, now: float) -> tuple[Result | None, str]:
    """The record a student may see of their own job, and why it is withheld when it is."""
    result = result_of(job)
    if job.mode != "final":
        return result, ""
    if not finals_visible(service, published, now):
        when = f" after the deadline ({service.deadline.isoformat()})" if service.deadline else ""
        return None, f"a final result is shown{when} or when staff publish the results"
    if result is None:
        return None, ""
    for problem in result.problems:
        problem.output = ""
    return result, ""


def student_view(
    engine: Engine, job: store.Job, service: Service, published: float | None, now: float | None = None
) -> dict[str, Any]:
    now = time.time() if now is None else now
    result, withheld = visible_result(job, service, published, now)
    view: dict[str, Any] = {
        "id": job.id,
        "mode": job.mode,
        "problems": job.problem_list or [],
        "state": shown_state(job, withheld),
        "archive": job.archive_name,
        "created_at": iso(job.created_at),
        # a withheld final's times and progress would tell how long the hidden suite took it
        "started_at": None if withheld else iso(job.started_at),
        "finished_at": None if withheld else iso(job.finished_at),
        "late": job.late,
        "result": None if result is None else result.model_dump(mode="json"),
        "withheld": withheld,
        "error": "" if withheld else job.error,
    }
    if job.state == "queued" and not withheld:
        view["ahead"] = store.ahead_of(engine, job)
    return view


def shown_state(job: store.Job, withheld: str) -> str:
    """A withheld final is only ever "received": queued, running, graded or error would time it."""
    return WITHHELD_STATE if withheld else job.state


def summary(result: Result | None) -> dict[str, Any]:
    """One line of a list: the score and the speedup, or nothing."""
    if result is None:
        return {"score": None, "max_score": None, "speedup": None, "flags": []}
    return {
        "score": round(result.score, 2),
        "max_score": round(result.max_score, 2),
        "speedup": overall_speedup(result),
        "flags": flag_reasons(result),
    }


@dataclass
class Standing:
    """One ranked student: the job their place comes from."""

    student: str
    alias: str
    job: store.Job
    result: Result

    def row(self, rank: int) -> dict[str, Any]:
        speedup = overall_speedup(self.result)
        return {
            "rank": rank,
            "name": self.alias,
            "score": round(self.result.score, 2),
            "max_score": round(self.result.max_score, 2),
            "speedup": None if speedup is None else round(speedup, 3),
            "mode": self.job.mode,  # no time: when a row changed ties its alias to whoever saw a classmate submit
        }


def standings(engine: Engine, service: Service, alias_secret: str | None, now: float | None = None) -> list[Standing]:
    """The live leaderboard, best first: each student's best clean benchmark result, or, once
    final results are visible and exist, each student's best clean final (no final, no place).
    Aliases are keyed by the staff's secret (None: no aliases, for staff's own use)."""
    now = time.time() if now is None else now
    finals_shown = finals_visible(service, store.published_at(engine), now)
    graded = [j for j in store.all_jobs(engine, ("graded",)) if j.rerun_of is None]
    finals = [j for j in graded if j.mode == "final"] if finals_shown else []
    pool = finals or [j for j in graded if j.mode == "benchmark"]
    best: dict[str, tuple[store.Job, Result]] = {}
    for job in pool:
        result = result_of(job)
        if result is None or result.status != "graded" or flag_reasons(result):
            continue
        old = best.get(job.person_id)
        if old is None or rank_key(result) > rank_key(old[1]):
            best[job.person_id] = (job, result)
    names = display_names(best, alias_secret, {}) if alias_secret else {s: "" for s in best}
    ranked = [Standing(s, names[s], job, result) for s, (job, result) in best.items()]
    return sorted(ranked, key=lambda s: rank_key(s.result), reverse=True)


def side_by_side(engine: Engine) -> list[dict[str, Any]]:
    """Staff re-runs beside the runs they repeat: the same archive under a new secret."""
    every = {j.id: j for j in store.all_jobs(engine)}
    rows = []
    for job in every.values():
        if job.rerun_of is None or job.rerun_of not in every:
            continue
        first = every[job.rerun_of]
        before, after = summary(result_of(first)), summary(result_of(job))
        rows.append(
            {
                "student": job.person_id,
                "mode": job.mode,
                "original": first.id,
                "rerun": job.id,
                "state": job.state,
                "score_before": before["score"],
                "score_after": after["score"],
                "speedup_before": before["speedup"],
                "speedup_after": after["speedup"],
            }
        )
    return rows
