"""The problems of the assignment: one folder each, `grader/engine/problems/<name>/`, named as in the spec.

A problem's folder is a package whose `KIND` is its `ProblemKind`: the case model the spec's cases
are validated with, the float64 definition, and how inputs are made, calls run, work timed and
timed rounds refilled and sampled. `base.py` holds what every problem shares. `REGISTRY` maps each
folder's name to its kind, so a spec entry `name = "..."` finds its grading logic with no list to
edit. Every folder is imported with this package, none later: the worker looks its kind up after
it has dropped the grader's modules from `sys.modules` (grader/engine/harness/serve.py). The folders live inside
the package because the sandboxed worker can read nothing else of the course (sandbox.plan.runtime_paths).

Adding a problem: its `[[problems]]` entry in assignment/assignment.toml, its folder here, and,
found by the entry's `name` and `module`, student_template/<module>.py, reference/<module>.py,
handout/test_<name>.py and the write-up section of `writeup_section`; nothing else changes
(tests/grader/engine/problems/test_new_problem.py adds and grades a toy one).
"""

from __future__ import annotations

import importlib
import pkgutil

from grader.engine.problems.base import ProblemKind


def _discover() -> dict[str, ProblemKind]:
    """The kind of every problem folder beside this file, by folder name."""
    kinds: dict[str, ProblemKind] = {}
    for found in pkgutil.iter_modules(__path__):
        if not found.ispkg:
            continue
        kind = getattr(importlib.import_module(f"{__name__}.{found.name}"), "KIND", None)
        if not isinstance(kind, ProblemKind) or kind.name != found.name:
            raise ImportError(
                f"grader/engine/problems/{found.name}/__init__.py must set KIND to the ProblemKind named {found.name!r}"
            )
        kinds[found.name] = kind
    return kinds


REGISTRY: dict[str, ProblemKind] = _discover()
