"""`grader`'s command line: every command registers the one way, and every --help works."""

from __future__ import annotations

import argparse

import pytest

from grader import cli
from grader.engine.assignment.load import load_assignment


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


def _as_script(tmp_path, *argv: str):
    """`grader ARGV` as the console script runs it, with an exit handler that says whether Python's
    finalization ran."""
    import subprocess
    import sys

    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('finalized', flush=True))\n"
        "from grader import cli\n"
        f"sys.argv = ['grader', *{list(argv)!r}]\n"
        "sys.exit(cli.entry())\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)


def test_a_grading_leaves_without_pythons_finalization(tmp_path) -> None:
    """`grader grade` ends when its records are written (a second or more of finalization saved per
    grading), with its exit code and all it printed; a bad path still exits 2 with its message."""
    from pathlib import Path

    correct = Path(__file__).resolve().parents[3] / "examples" / "submissions" / "correct"
    done = _as_script(tmp_path, "grade", str(correct), "--problems", "gelu", "--public-only", "--out", "out")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "finalized" not in done.stdout and "total" in done.stdout
    assert "wrote " in done.stderr and (tmp_path / "out" / "result.json").is_file()
    bad = _as_script(tmp_path, "grade", str(tmp_path / "nowhere"))
    assert bad.returncode == 2 and "is not a folder" in " ".join(bad.stderr.split()) and "finalized" not in bad.stdout


def test_other_commands_end_the_usual_way(tmp_path) -> None:
    """Verbs whose libraries clean up at exit (Ray's local cluster in `grader batch`, the service's
    database) go through finalization as before."""
    from grader.engine.spec.model import DEFAULT_SPEC

    done = _as_script(tmp_path, "writeup", "--check", "--spec", str(DEFAULT_SPEC))
    assert done.returncode == 0 and "finalized" in done.stdout, done.stderr[-2000:]
