"""docs/walkthrough.md stays true without its screenshots being taken again: every `grader` and
`pytest` command it quotes parses (the verbs and options of today's command line), every repository
path a command names exists, every image it shows is there, every link to one of its sections
reaches a heading, and README.md links to it.

The walk's outputs are transcripts of real runs (scripts/walkthrough-screenshots.py prints the
service's); this checks only what can change under them without anyone rerunning them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from grader.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
WALK = ROOT / "docs" / "walkthrough.md"
FENCE = re.compile(r"^```.*?$(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:grader|pytest) [^`]+)`(?!`)")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
ANCHOR = re.compile(r"\]\(#([^)]+)\)")
HEADING = re.compile(r"^#+ (.+)$", re.M)
#: where a shell line stops being one command's arguments
SHELL_ENDS = {"|", "||", "&&", ";", ">", ">>", "2>&1", "&"}
#: arguments that name a file of this repository (a student's and a TA's paths are their own)
REPO_PATHS = ("examples/", "student_template", "handout", "reference", "assignment/", "docs/", "scripts/")


def walk_text() -> str:
    return WALK.read_text(encoding="utf-8")


def quoted_commands(text: str) -> list[tuple[str, bool]]:
    """Each `grader`/`pytest` command quoted: (the command, whether it is whole). Whole: a `$ `-prompted
    line of a code block (with its continuation lines); not: an inline one of the prose, which may
    name a verb and an option without the arguments a run needs."""
    commands = []
    for block in FENCE.findall(text):
        lines = block.splitlines()
        for n, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            command = line[2:]
            while command.endswith("\\") and n + 1 < len(lines):
                n += 1
                command = command[:-1] + " " + lines[n].strip()
            commands.append((command, True))
    commands += [(c, False) for c in INLINE.findall(re.sub(r"```.*?```", "", text, flags=re.S))]
    return [(c, whole) for c, whole in commands if words(c) and words(c)[0] in ("grader", "pytest")]


def words(command: str) -> list[str]:
    """The command's own words: no leading VAR=value, nothing from a pipe, redirection or comment on."""
    tokens = shlex.split(command, comments=True)
    while tokens and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", tokens[0]):
        tokens.pop(0)
    for n, token in enumerate(tokens):
        if token in SHELL_ENDS:
            return tokens[:n]
    return tokens


def test_the_walk_quotes_commands_of_both_kinds() -> None:
    commands = [words(c)[0] for c, whole in quoted_commands(walk_text()) if whole]
    assert commands.count("pytest") >= 2 and commands.count("grader") >= 6, commands


def grader_verb(name: str) -> argparse.ArgumentParser:
    verbs = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert name in verbs, f"grader has no verb {name!r}"
    return verbs[name]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("command", "whole"), quoted_commands(walk_text()) if WALK.exists() else [])
def test_a_quoted_command_parses(command: str, whole: bool, pytestconfig: pytest.Config) -> None:
    argv = words(command)
    if argv[0] == "grader":
        verb = grader_verb(argv[1])
        unknown = [
            w.split("=")[0]
            for w in argv[2:]
            if w.startswith("--") and w.split("=")[0] not in verb._option_string_actions
        ]
        assert not unknown, f"{command}: grader {argv[1]} has no {unknown}"
        if not whole:
            return
        errors = io.StringIO()
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            try:
                args = build_parser().parse_args(argv[1:])
            except SystemExit as exc:  # --help exits 0; a missing or bad argument exits 2 with the reason
                assert exc.code == 0, f"{command}\n{errors.getvalue()}"
                return
        positional = [v for k, v in vars(args).items() if k in ("path", "submission", "submissions", "results")]
    else:  # the options of this pytest, the handout's (--submission, --dtype) and its plugins' included
        parsed, unknown = pytestconfig._parser.parse_known_and_unknown_args(argv[1:])
        assert not unknown, f"{command}: pytest knows no {unknown}"
        positional = [*parsed.file_or_dir, parsed.submission]
    for value in positional:
        if isinstance(value, str) and value.startswith(REPO_PATHS):
            assert (ROOT / value).exists(), f"{command}: no {value} in this repository"


def test_every_image_shown_is_there() -> None:
    shown = IMAGE.findall(walk_text())
    assert shown, "the walk shows no screenshot"
    for link in shown:
        assert (WALK.parent / link).is_file(), f"docs/walkthrough.md shows {link}, which is missing"


def test_every_link_within_the_walk_reaches_a_heading() -> None:
    text = walk_text()
    # GitHub's anchors: lower case, punctuation dropped (backticks, colons, commas, apostrophes), spaces as hyphens
    anchors = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in HEADING.findall(FENCE.sub("", text))}
    missing = [a for a in ANCHOR.findall(text) if a not in anchors]
    assert not missing, f"no heading for {missing}"


def test_the_readme_leads_to_the_walk_and_the_walk_to_its_script() -> None:
    assert "(docs/walkthrough.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "scripts/walkthrough-screenshots.py" in walk_text()
    assert (ROOT / "scripts" / "walkthrough-screenshots.py").is_file()
