"""What a person should look at in a result, beyond its score: the flags.

A zero can mean "broken" (a crash, a wrong answer) or "caught" (a failed kernel check, timing
that could not be trusted). The gradebook, summary.json, Gradescope's output, report.html and
the leaderboard all show the same flags, computed here from the result record alone, so a TA
tells one from the other at a glance without opening each student's files. They are computed
once, as a record is finished (`settle`), and kept in it (`Result.flags`); readers take them
from there (`of`).
"""

from __future__ import annotations

from grader.engine.records.model import Flag, ProblemResult, Result

#: scan findings that are not evidence for a person to weigh: a file that does not parse is an
#: error the problem's import already reports (its line stays in the report), not a cheat's trace
NOT_EVIDENCE = frozenset({"syntax-error"})
MAX_DETAIL = 300


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def kernel_check_failure(problem: ProblemResult) -> str | None:
    """The failed kernel check's message, if the problem has one."""
    return problem.kernel_check


def problem_flags(problem: ProblemResult) -> list[Flag]:
    flags: list[Flag] = []
    cheat = kernel_check_failure(problem)
    if cheat is not None:
        flags.append(Flag(kind="kernel check failed", problem=problem.name, detail=_short(cheat)))
    perf = problem.performance
    if perf is not None:
        shape_flags = [f"{s.name}: {text}" for s in perf.shapes for text in s.flags]
        if shape_flags or perf.status == "flagged":
            flags.append(
                Flag(
                    kind="timing flagged",
                    problem=problem.name,
                    detail=_short("; ".join(shape_flags) or perf.reason or "no reason given"),
                )
            )
        if perf.review:
            flags.append(Flag(kind="review", problem=problem.name, detail=_short(perf.review)))
    if problem.device_review:
        flags.append(Flag(kind="review", problem=problem.name, detail=_short(problem.device_review)))
    evidence = [f for f in problem.findings if f.rule not in NOT_EVIDENCE]
    if evidence:
        rules = sorted({f.rule for f in evidence})
        detail = _short(f"{len(evidence)} finding(s): {', '.join(rules)}")
        flags.append(Flag(kind="scan findings", problem=problem.name, detail=detail))
    return flags


def result_flags(result: Result) -> list[Flag]:
    """Every flag of a result, problem by problem (scan findings shared by problems count once)."""
    flags: list[Flag] = []
    seen_findings: set[tuple[str, int, str]] = set()
    for problem in result.problems:
        for flag in problem_flags(problem):
            if flag.kind == "scan findings":
                keys = {(f.file, f.line, f.rule) for f in problem.findings if f.rule not in NOT_EVIDENCE}
                if keys <= seen_findings:
                    continue
                seen_findings |= keys
            flags.append(flag)
    return flags


def settle(result: Result) -> Result:
    """Compute the record's flags and keep them in it: once, where a record is finished."""
    result.flags = result_flags(result)
    return result


def of(result: Result) -> list[Flag]:
    """The flags a record holds (computed for one written before they were kept)."""
    return result.flags if result.flags is not None else result_flags(result)


def labels(result: Result | None) -> str:
    """The gradebook's flags cell: labels joined by '; ' (empty when nothing to look at)."""
    return "; ".join(f.label for f in of(result)) if result is not None else ""
