"""The spec a result was graded with, as two hashes: what decides verdicts, and what scores them.

A spec edited under the same version (one problem's correctness points from 10 to 20, a new hidden
case) must not leave old grades standing silently. Splitting the hash tells the two kinds of
change apart: points, case weights and thresholds only re-score the stored per-case results;
anything else in a graded problem (its cases, tolerances, time limit, benchmark
shapes, module and function) or outside the problems (a table such as [environment]) means the
verdicts themselves may differ, so the submission is graded again.

Only the suite that was graded counts: on a CPU, the CPU cases; on a GPU, the GPU cases and
the benchmark shapes. Editing a GPU case does not send every CPU grading back to the queue.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from grader.engine.records.model import SpecFingerprint
from grader.engine.spec.model import DEFAULT_PRECISION, DEFAULT_WINDOW_S, Assignment, Problem

Suite = Literal["cpu", "gpu"]
#: per-problem keys that only turn verdicts into points
SCORING_KEYS = ("points", "thresholds")
#: thresholds that decide how long shapes are timed (measurements, not points), with their defaults
TIMING_KEYS = {"precision": DEFAULT_PRECISION, "window_s": DEFAULT_WINDOW_S}
#: per-problem keys that change neither verdicts nor points (what students read)
WORDING_KEYS = ("title", "writeup_section")


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _problem_parts(problem: Problem, suite: Suite) -> tuple[dict[str, Any], dict[str, Any]]:
    data = problem.model_dump(serialize_as_any=True)  # each case with its own problem's fields
    cases = [c for c in data.pop("cases") if c["suite"] == suite]
    benchmarks = data.pop("benchmarks") if suite == "gpu" else []
    scoring = {key: data.pop(key) for key in SCORING_KEYS}
    # how long shapes are timed decides measurements, not points; named only when not the default,
    # so results graded before the setting existed keep their fingerprint
    for key, default in TIMING_KEYS.items():
        value = scoring["thresholds"].pop(key, default)
        if value != default:
            data[f"timing_{key}"] = value
    for key in WORDING_KEYS:
        data.pop(key)
    scoring["weights"] = {c["name"]: c.pop("weight") for c in cases}
    grading = {**data, "cases": cases, "benchmarks": benchmarks}
    return grading, scoring


def fingerprint(assignment: Assignment, problems: list[str], suite: Suite) -> SpecFingerprint:
    """The two hashes for grading `problems` of `assignment` on `suite`'s cases."""
    grading: dict[str, Any] = {}
    scoring: dict[str, Any] = {}
    for problem in assignment.problems:
        if problem.name in problems:
            grading[problem.name], scoring[problem.name] = _problem_parts(problem, suite)
    # [service] (quotas, the deadline) decides who may submit, never a verdict or a point
    rest = assignment.model_dump(exclude={"problems", "assignment", "service"}, serialize_as_any=True)
    rest["assignment"] = {"name": assignment.assignment.name, "version": assignment.assignment.version}
    return SpecFingerprint(grading=_digest({"problems": grading, "rest": rest}), scoring=_digest(scoring))


def suite_of(interpreter: bool) -> Suite:
    """CPU results (Triton's interpreter) were graded on the CPU suite, others on the GPU suite."""
    return "cpu" if interpreter else "gpu"
