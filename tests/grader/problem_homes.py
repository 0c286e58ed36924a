"""Where each problem of a course lives, found by the name and module its spec gives it.

A problem is its spec entry, its grading folder grader/engine/problems/<name>/, its stub in
student_template/, its staff solution in reference/, its public tests in handout/ and its
section of the write-up. Read from the files alone (the spec as TOML, no import), so that a copy
of the course with another grader in it can be checked as well as this one.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of `markdown`: `## 1. GeLU` -> `1-gelu`."""
    headings = re.findall(r"^#{1,6} +(.+?) *$", markdown, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def defines(path: Path, name: str) -> bool:
    """Whether the module at `path` defines `name` at its top level (a function or a class)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name for node in tree.body)


def missing(root: Path) -> list[str]:
    """One line per piece that a problem of root/assignment/assignment.toml lacks."""
    spec = tomllib.loads((root / "assignment" / "assignment.toml").read_text(encoding="utf-8"))
    gaps = []
    for problem in spec["problems"]:
        name, module, function = problem["name"], problem["module"], problem["function"]
        if not (root / "grader" / "engine" / "problems" / name / "__init__.py").is_file():
            gaps.append(f"{name}: no grading folder grader/engine/problems/{name}/")
        for folder in ("student_template", "reference"):
            path = root / folder / f"{module}.py"
            if not path.is_file() or not defines(path, function):
                gaps.append(f"{name}: {folder}/{module}.py does not define {function}")
        handout = root / "handout" / f"test_{name}.py"
        if not handout.is_file() or f'PROBLEM = "{name}"' not in handout.read_text(encoding="utf-8"):
            gaps.append(f"{name}: no handout/test_{name}.py with PROBLEM = {name!r}")
        page, _, anchor = problem["writeup_section"].partition("#")
        if not (root / page).is_file() or anchor not in heading_anchors((root / page).read_text(encoding="utf-8")):
            gaps.append(f"{name}: the write-up has no section {problem['writeup_section']}")
    return gaps
