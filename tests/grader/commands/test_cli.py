"""`grader`'s command line: every command registers the one way, and every --help works."""

from __future__ import annotations

import argparse

import pytest

from grader import cli
from grader.spec.load import load_assignment


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_command_module_registers_with_add_parser() -> None:
    assert all(callable(getattr(module, "add_parser", None)) for module in cli.COMMANDS)
    names = list(_commands(cli.build_parser()))
    assert names[:3] == ["grade", "batch", "image"] and "leaderboard" in names and len(names) == len(set(names))


@pytest.mark.parametrize("command", sorted(_commands(cli.build_parser())))
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args([command, "--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: grader {command}")


def test_grade_help_names_the_spec_problems() -> None:
    text = _commands(cli.build_parser())["grade"].format_help()
    assert all(f"{p.module}.py" in text for p in load_assignment(hidden=False).problems)
