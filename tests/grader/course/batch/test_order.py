"""The order a batch grading several at once starts its students in: the heaviest first."""

from __future__ import annotations

import shutil
from pathlib import Path

from grader.course.batch.discovery import discover
from grader.course.batch.order import TEMPLATE, expected_cost, heaviest_first
from grader.course.batch.tasks import Task, prepare
from grader.engine.assignment.load import load_assignment

SPEC = load_assignment(hidden=False)
MODULES = [p.module for p in SPEC.problems]


def tasks(tmp_path: Path, edits: dict[str, list[str]]) -> list[Task]:
    """A class whose students start from the stubs; `edits`: per student, the modules they wrote."""
    subs = tmp_path / "subs"
    for student, written in edits.items():
        shutil.copytree(TEMPLATE, subs / student)
        for module in written:
            path = subs / student / f"{module}.py"
            path.write_text(path.read_text() + "\n# written by the student\n")
    return [prepare(entry, tmp_path / "out", MODULES) for entry in discover(subs)]


def test_the_students_who_wrote_the_most_start_first(tmp_path: Path) -> None:
    class_ = tasks(
        tmp_path, {"a-stubs": [], "b-gelu": ["gelu"], "c-attention": ["flash_attention"], "d-two": ["gelu", "softmax"]}
    )
    limits = {p.module: p.time_limit_s for p in SPEC.problems}
    costs = {t.student: expected_cost(t, SPEC.problems) for t in class_}
    assert costs == {
        "a-stubs": 0,
        "b-gelu": limits["gelu"],
        "c-attention": limits["flash_attention"],
        "d-two": limits["gelu"] + limits["softmax"],
    }
    order = [t.student for t in heaviest_first(class_, SPEC.problems)]
    assert order == ["c-attention", "d-two", "b-gelu", "a-stubs"]


def test_ties_and_missing_files_keep_the_class_order(tmp_path: Path) -> None:
    class_ = tasks(tmp_path, {"a": ["gelu"], "b": ["gelu"], "c": []})
    (tmp_path / "subs" / "c" / "gelu.py").unlink()  # a missing file costs nothing, like a stub
    assert [t.student for t in heaviest_first(class_, SPEC.problems)] == ["a", "b", "c"]
