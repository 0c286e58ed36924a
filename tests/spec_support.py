"""Copies of the assignment's spec with one setting changed, for tests that need a short limit."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from grader.engine.spec.model import DEFAULT_SPEC


def spec_with_limit(folder: Path, problem: str, seconds: int) -> Path:
    """A copy of the spec (hidden cases beside it) in which one problem's time limit is `seconds`.

    Only the problem that hangs gets a short limit: the others keep the spec's, so a loaded
    machine compiling their kernels slowly cannot fail the test.
    """
    folder.mkdir()
    shutil.copy(DEFAULT_SPEC.parent / "hidden_cases.toml", folder / "hidden_cases.toml")
    text = DEFAULT_SPEC.read_text()
    block = re.compile(r'(name = "' + problem + r'"\n(?:(?!\[\[problems\]\]).)*?time_limit_s = )[0-9.]+', re.S)
    text, count = block.subn(lambda m: m.group(1) + str(seconds), text)
    assert count == 1, f"no time_limit_s found for {problem} in {DEFAULT_SPEC}"
    (folder / "assignment.toml").write_text(text)
    return folder / "assignment.toml"


def spec_with_budget(folder: Path, benchmark: str, gib: float) -> Path:
    """A copy of the spec (hidden cases beside it) in which one benchmark shape's memory budget is `gib`."""
    folder.mkdir()
    shutil.copy(DEFAULT_SPEC.parent / "hidden_cases.toml", folder / "hidden_cases.toml")
    pattern = re.compile(r'(name = "' + re.escape(benchmark) + r'"\ngpu_memory_gib = )[0-9.]+')
    text, count = pattern.subn(lambda m: m.group(1) + str(gib), DEFAULT_SPEC.read_text())
    assert count == 1, f"no gpu_memory_gib found for {benchmark} in {DEFAULT_SPEC}"
    (folder / "assignment.toml").write_text(text)
    return folder / "assignment.toml"
