"""`grader grade`'s command line, both ways (`grader.engine.orchestrator.launch`): what a class
launches is what the engine reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader import cli
from grader.engine.orchestrator import launch
from grader.engine.orchestrator.launch import GradeCommand
from grader.engine.orchestrator.options import options_for

COMMANDS = [
    GradeCommand(),
    GradeCommand(spec=Path("/s/assignment.toml"), device="cpu", timeout=12.5, problems=("gelu", "matmul")),
    GradeCommand(device="cuda", public_only=True, timing=False, profile=True, parallel=3, worker_user="grader"),
    GradeCommand(keep_kernels=False, secret="s3cr3t", hide=(Path("/class"), Path("/secret.txt"))),
    GradeCommand(kernel_cache=Path("/var/kernels"), secret="other"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=range(len(COMMANDS)))
def test_a_command_parses_back_to_itself(command: GradeCommand, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = command.args("/sub", "/out")
    env = command.env({})
    for name in (launch.SECRET_ENV, launch.HIDE_ENV, launch.ARCHIVE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(launch.SECRET_ENV, env[launch.SECRET_ENV])  # as the child finds it
    args = cli.build_parser().parse_args(argv)
    assert (args.path, args.out) == ("/sub", "/out")
    parsed = GradeCommand.from_args(args, list(command.hide))
    expected = command if command.spec is not None else command.model_copy(update={"spec": parsed.spec})
    assert parsed == expected


def test_the_secret_and_hidden_paths_travel_in_the_environment_only() -> None:
    command = COMMANDS[3]
    argv = command.argv("/sub", "/out")
    assert not any("s3cr3t" in a or "/class" in a for a in argv), argv
    env = command.env({"GRADER_SECRET": "stale", "GRADER_HIDE": "/stale", "HOME": "/h"})
    assert env["GRADER_SECRET"] == "s3cr3t" and env["HOME"] == "/h"
    assert env["GRADER_HIDE"].split(os.pathsep) == ["/class", "/secret.txt"]
    assert "s3cr3t" not in repr(command)


def test_the_engine_reads_what_the_command_says() -> None:
    options = options_for(COMMANDS[2])
    assert (options.device, options.time_performance, options.profile, options.parallel) == ("cuda", False, True, 3)
    assert options_for(COMMANDS[3]).kernel_cache is None
    assert options_for(COMMANDS[4]).kernel_cache == Path("/var/kernels")
    assert options_for(COMMANDS[1]).problems == ["gelu", "matmul"]


def test_an_option_nobody_knows_is_refused() -> None:
    with pytest.raises(ValueError, match="extra"):
        GradeCommand.model_validate({"device": "cpu", "compile_aside": True})
