"""Gradescope's results.json as its documentation states it, written apart from the grader's own model.

Source: gradescope-autograders.readthedocs.io, "Autograder Specifications" ("Output format",
"Controlling Test Case Visibility", "Controlling standard output visibility") and
"Leaderboards". Field names and types are the documented ones; `status`, `output_format`,
`test_output_format` and `name_format` are the later additions the grader's model also uses.
A results.json passes when `check(data)` returns no problems.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, StrictStr, ValidationError

# "Options for the visibility field are as follows: hidden, after_due_date, after_published, visible"
Visibility = Literal["hidden", "after_due_date", "after_published", "visible"]
Format = Literal["text", "html", "simple_format", "md", "ansi"]
Number = StrictInt | StrictFloat  # "score": 44.0; a string or a boolean is not a score


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class DocTest(_Doc):
    score: Number | None = None
    max_score: Number | None = None
    status: Literal["passed", "failed"] | None = None
    name: StrictStr | None = None
    name_format: Format | None = None
    number: StrictStr | None = None
    output: StrictStr | None = None
    output_format: Format | None = None
    tags: list[StrictStr] | None = None
    visibility: Visibility | None = None
    extra_data: dict[str, Any] | None = None


class DocLeaderboardEntry(_Doc):
    name: StrictStr
    value: Number | StrictStr
    # "The default is "desc" for descending"
    order: Literal["asc", "desc"] | None = None


class DocResults(_Doc):
    score: Number | None = None
    execution_time: Number | None = None
    output: StrictStr | None = None
    output_format: Format | None = None
    test_output_format: Format | None = None
    test_name_format: Format | None = None
    visibility: Visibility | None = None
    stdout_visibility: Visibility | None = None
    extra_data: dict[str, Any] | None = None
    tests: list[DocTest] | None = None
    leaderboard: list[DocLeaderboardEntry] | None = None


def check(data: Any) -> list[str]:
    """What in `data` Gradescope's documented format does not allow (empty: it is accepted)."""
    try:
        results = DocResults.model_validate(data)
    except ValidationError as exc:
        return [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
    # "score: optional, but required if not on each test case below"
    if results.score is None and not (results.tests and all(t.score is not None for t in results.tests)):
        return ["no top-level score, and not every test has one"]
    return []
