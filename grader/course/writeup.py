"""The write-up's tables, generated from the spec: `grader writeup [--check]`.

assignment/README.md quotes the spec (points, time limits, tolerances, thresholds, the kernel rule's allow-list,
cases and benchmark shapes). Hand-copied numbers drifted: one problem's limit read 420 s against the
spec's 600, one problem listed 5 of its 9 forbidden ops. Each such table now sits between two markers,

    <!-- generated from assignment.toml by `grader writeup`: NAME -->
    ...
    <!-- end of generated NAME -->

and is rendered from the public spec (never the hidden cases) with the macros of
grader/engine/records/templates/writeup_blocks.md.j2. `--check` (and tests/grader/course/test_writeup.py) fails when a
block differs from what the spec gives.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment, FileSystemLoader

from grader.engine.records.files import TEMPLATES
from grader.engine.spec.model import SHORT_DTYPE, Assignment, Case

TEMPLATE = "writeup_blocks.md.j2"
BLOCK = re.compile(
    r"(?P<open><!-- generated from assignment\.toml by `grader writeup`: (?P<name>[a-z_:-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<close><!-- end of generated (?P=name) -->)",
    re.S,
)


class WriteupError(Exception):
    """A marker names a block the spec cannot render (a typo, a problem that is gone)."""


def _num(x: float) -> str:
    """A number as the write-up writes it: 10, 0.9, and small tolerances as 1e-5, 1.6e-2."""
    if x == 0 or abs(x) >= 0.1:
        return f"{x:g}"
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def describe_case(case: Case) -> str:
    """A case the way the write-up names it (`[64, 64]` fp32, 512³ fp16 with an activation, ...): its model says how."""
    return case.describe() + (" (compile-only)" if case.compile_only else "")


def _macros() -> Any:
    env = Environment(loader=FileSystemLoader(TEMPLATES), keep_trailing_newline=True, trim_blocks=False)
    env.filters.update(
        num=_num,
        case=describe_case,
        short_dtype=lambda d: SHORT_DTYPE.get(d, d),
        op=lambda o: f"`{o.removeprefix('aten::')}`",
    )
    return env.get_template(TEMPLATE).module


def render_block(name: str, spec: Assignment) -> str:
    """The text of one block (without its markers), ending in a newline."""
    macros = _macros()
    kind, _, problem = name.partition(":")
    if kind in ("points", "limits", "thresholds", "kernel_rule", "gradescope"):
        text = str(getattr(macros, kind)(spec))
    elif kind in ("cases",) and problem in [p.name for p in spec.problems]:
        text = str(macros.cases(spec.problem(problem)))
    else:
        raise WriteupError(f"the write-up names a generated block {name!r} that the spec cannot render")
    return text.strip("\n") + "\n"


def regenerate(text: str, spec: Assignment) -> tuple[str, list[str]]:
    """`text` with every generated block rendered afresh, and the names of those that changed."""
    changed: list[str] = []

    def fill(match: re.Match[str]) -> str:
        body = render_block(match["name"], spec)
        if body != match["body"]:
            changed.append(match["name"])
        return match["open"] + body + match["close"]

    return BLOCK.sub(fill, text), changed


def blocks(text: str) -> list[str]:
    return [m["name"] for m in BLOCK.finditer(text)]
