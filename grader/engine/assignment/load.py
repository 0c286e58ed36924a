"""Reading assignment.toml and its hidden cases into the validated models of grader.engine.spec.model.

Problem-specific case fields are validated by each problem's own case model (grader.engine.problems),
so this module sits above the problems; the models below them import nothing of either.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from grader.engine.assignment.checks import problems_errors
from grader.engine.problems import REGISTRY
from grader.engine.spec import toml
from grader.engine.spec.model import DEFAULT_SPEC, HIDDEN_NAME, Assignment, Case, SpecError, model_errors


def _typed_cases(path: Path, prob: dict[str, Any], key: str, raw_cases: list[Any], visibility: str) -> list[Case]:
    """Validate raw case tables with the problem's own case model."""
    name = prob.get("name")
    kind = REGISTRY.get(name) if isinstance(name, str) else None
    if kind is None:
        known = ", ".join(sorted(REGISTRY))
        raise SpecError(
            f"{path}: problems.name = {name!r} is not a known problem: no grading folder "
            f"grader/engine/problems/{name}/ (expected one of: {known})"
        )
    if not isinstance(raw_cases, list):
        raise SpecError(f"{path}: problems[{name}].{key} must be an array of tables")
    cases: list[Case] = []
    for i, raw in enumerate(raw_cases):
        if not isinstance(raw, dict):
            raise SpecError(f"{path}: problems[{name}].{key}[{i}] must be a table")
        raw = {"visibility": visibility, **raw}
        try:
            cases.append(kind.case_model.model_validate(raw))
        except ValidationError as exc:
            label = raw.get("name", i)
            raise SpecError(model_errors(path, exc, prefix=f"problems[{name}].{key}[{label}].")) from None
    return cases


def load_assignment(path: Path | str = DEFAULT_SPEC, hidden: Path | str | None | Literal[False] = None) -> Assignment:
    """Load and validate the spec; merge the hidden cases file beside it unless `hidden=False`.

    The hidden cases live in their own file so that the student export can leave them out and the
    Docker image can make them readable by root only.
    """
    path = Path(path)
    data = toml.read(path)
    hidden_path = None if hidden is False else Path(hidden) if hidden else path.with_name(HIDDEN_NAME)
    hidden_data: dict[str, Any] = {}
    if hidden_path is not None and hidden_path.exists():
        hidden_data = toml.read(hidden_path)
        unknown = set(hidden_data) - {"hidden"}
        if unknown:
            raise SpecError(
                f"{hidden_path}: unexpected top-level keys {sorted(unknown)} (expected only [[hidden.<problem>]])"
            )

    problems = data.get("problems")
    if not isinstance(problems, list) or not problems:
        raise SpecError(f"{path}: key 'problems' must be a non-empty array of tables ([[problems]])")
    hidden_by_problem = hidden_data.get("hidden", {})
    if not isinstance(hidden_by_problem, dict):
        raise SpecError(f"{hidden_path}: 'hidden' must be a table of arrays ([[hidden.<problem>]])")
    names = {p.get("name") for p in problems if isinstance(p, dict)}
    for extra in set(hidden_by_problem) - names:
        raise SpecError(f"{hidden_path}: hidden.{extra} names no problem in {path.name}")

    built = []
    for i, prob in enumerate(problems):
        if not isinstance(prob, dict):
            raise SpecError(f"{path}: problems[{i}] must be a table")
        prob = dict(prob)
        cases = _typed_cases(path, prob, "cases", prob.pop("cases", []), "public")
        cases += _typed_cases(
            hidden_path or path, prob, "hidden", hidden_by_problem.get(prob.get("name"), []), "hidden"
        )
        benchmarks = _typed_cases(path, prob, "benchmarks", prob.pop("benchmarks", []), "public")
        built.append({**prob, "cases": cases, "benchmarks": benchmarks})
    try:
        assignment = Assignment.model_validate({**data, "problems": built})
    except ValidationError as exc:
        raise SpecError(model_errors(path, exc, names=[str(p.get("name", i)) for i, p in enumerate(built)])) from None
    errors = problems_errors(assignment.problems, assignment.kernel_rule)
    if errors:
        raise SpecError("\n".join([f"{path}: invalid assignment spec", *(f"  - {e}" for e in errors)]))
    return assignment
