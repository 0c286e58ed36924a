"""Writing a graded Result: result.json, report.html (jinja2) and Gradescope's results.json.

Every file is written atomically (a temporary file in the same folder, then rename), so a grader
killed at any moment leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from grader.engine.records.files import TEMPLATES, write_atomic
from grader.engine.records.model import Result, TestResult


def _jinja() -> Environment:
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    env.filters["pts"] = lambda x: "–" if x is None else f"{round(x, 2):g}"
    return env


#: failing problems first, then partial, then the rest
STATUS_ORDER = {"error": 0, "failed": 1, "partial": 2, "skipped": 3, "passed": 4}


@dataclass
class TestGroup:
    """Tests that failed the same way: one message shown in full, with every test it concerns.

    The same mistake hit by several cases often differs only in its numbers (the program id, how
    many addresses, which element): such messages share a group, and the others are kept beside
    the first rather than repeated in full, so eight out-of-bounds cases read as one error."""

    status: str
    message: str
    tests: list[TestResult]
    #: the group's tests whose message differs from the first in numbers only
    variants: list[TestResult] = field(default_factory=list)


#: a number in a message: decimal, with a fraction or an exponent, or hexadecimal (an address)
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _shape(message: str) -> str:
    """A message with its numbers blanked: two messages of one shape are the same error."""
    return _NUMBER.sub("#", message)


def failure_groups(tests: list[TestResult]) -> list[TestGroup]:
    """The problem's failing tests, grouped by message up to its numbers, in first-seen order."""
    groups: dict[tuple[str, str], TestGroup] = {}
    for test in tests:
        if test.status not in ("failed", "error"):
            continue
        key = (test.status, _shape(test.message))
        group = groups.setdefault(key, TestGroup(test.status, test.message, []))
        group.tests.append(test)
        if test.message != group.message:
            group.variants.append(test)
    return sorted(groups.values(), key=lambda g: STATUS_ORDER[g.status])


#: the write-up the spec's `writeup_section` anchors point into (a repository checkout or the handout)
WRITEUP = Path(__file__).resolve().parents[3] / "assignment" / "README.md"


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as dashes."""
    return "".join(c for c in heading.strip().lower() if c.isalnum() or c in " -_").replace(" ", "-")


def writeup_section(anchor: str, writeup: Path = WRITEUP) -> str:
    """The text of the write-up's section `anchor` points to ("file.md#slug"), "" when not found.

    Embedded in report.html: a link relative to the repository would not resolve next to the
    report, wherever a student or a TA opens it."""
    slug = anchor.partition("#")[2]
    try:
        lines = writeup.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    out: list[str] = []
    level = 0
    for line in lines:
        hashes = len(line) - len(line.lstrip("#"))
        is_heading = 0 < hashes <= 6 and line[hashes : hashes + 1] == " "
        if level and is_heading and hashes <= level:
            break
        if not level and is_heading and _slug(line[hashes:]) == slug:
            level = hashes
        if level:
            out.append(line)
    return "\n".join(out).strip()


def render_html(result: Result, alias: str | None = None, back: str | None = None) -> str:
    """The student's report; `alias`: their name on the class's leaderboard, and `back`: the page it
    was reached from (the service's submissions list), which the course layer knows."""
    from grader.engine.records import flags

    problems = sorted(result.problems, key=lambda p: STATUS_ORDER.get(p.status, 9))
    return (
        _jinja()
        .get_template("report.html.j2")
        .render(
            r=result,
            problems=problems,
            groups={p.name: failure_groups(p.tests) for p in result.problems},
            flags=flags.of(result),
            alias=alias,
            back=back,
            writeup={p.name: writeup_section(p.writeup_section) for p in result.problems if p.writeup_section},
        )
    )


def gradescope(result: Result) -> dict[str, Any]:
    """Gradescope's results.json as a dictionary (grader.engine.records.gradescope builds and checks it)."""
    from grader.engine.records.gradescope import as_dict

    return as_dict(result)


def gradescope_json(result: Result) -> str:
    from grader.engine.records.gradescope import results_json

    return results_json(result)


def write_result(result: Result, out: Path) -> None:
    """result.json, report.html and gradescope/results.json under `out`."""
    write_atomic(out / "result.json", result.model_dump_json(indent=2))
    write_atomic(out / "report.html", render_html(result))
    write_atomic(out / "gradescope" / "results.json", gradescope_json(result))
