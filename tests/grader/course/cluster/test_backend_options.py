"""The cluster backends' small parts: their options, what a node is sent, and the errors that stop a
batch before anything is queued (the engines themselves: test_backend_ray.py, test_backend_slurm.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grader import cli
from grader.commands import cluster_options
from grader.course.batch.errors import BatchError
from grader.course.cluster import node, ray_backend, slurm_backend
from grader.engine.assignment.load import load_assignment
from grader.engine.records.files import submission_hash
from grader.engine.records.model import AssignmentRef, Result, RunEnvironment, SubmissionRef

ROOT = Path(__file__).resolve().parents[4]
CORRECT = ROOT / "examples" / "submissions" / "correct"


def test_ray_asks_for_one_gpu_on_a_gpu_grading_and_cpus_otherwise() -> None:
    # a share of a GPU: correctness of several gradings together, timing alone through the node's lease
    assert ray_backend.task_options("cuda", None) == {"num_cpus": 2.0, "num_gpus": 0.25}
    assert ray_backend.task_options("cpu", None) == {"num_cpus": 1.0, "num_gpus": 0.0}
    given = cluster_options.ray_resources('{"CPU": 2, "grader_slot": 1}')
    assert ray_backend.task_options("cpu", given) == {
        "num_cpus": 2.0,
        "num_gpus": 0.0,
        "resources": {"grader_slot": 1.0},
    }


@pytest.mark.parametrize("text", ["{CPU: 1}", '{"GPU": -1}', "[1]", '{"GPU": "one"}'])
def test_bad_ray_resources_are_a_usage_error_naming_the_option(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.build_parser().parse_args(["batch", "subs", "--out", "out", "--backend", "ray", "--ray-resources", text])
    assert exited.value.code == 2
    assert "--ray-resources" in capsys.readouterr().err


def test_sbatch_options_pass_through() -> None:
    assert slurm_backend.sbatch_options(["account=cs336", "qos = high", "--exclusive"]) == {
        "account": "cs336",
        "qos": "high",
        "exclusive": True,
    }
    with pytest.raises(BatchError, match="KEY=VALUE"):
        slurm_backend.sbatch_options(["=cs336"])


def test_a_packed_submission_unpacks_to_the_same_content_hash(tmp_path: Path) -> None:
    data = node.pack(CORRECT)
    folder = node.unpack(data, tmp_path, [p.module for p in load_assignment(hidden=False).problems])
    assert submission_hash(folder) == submission_hash(CORRECT)
    assert not (tmp_path / "submission.tar.gz").exists()


def test_only_the_known_result_files_travel_back(tmp_path: Path) -> None:
    (tmp_path / "gradescope").mkdir()
    for name in ("result.json", "report.html", "gradescope/results.json", "secret.txt"):
        (tmp_path / name).write_text(name)
    files = node.read_outputs(tmp_path)
    assert sorted(files) == sorted(node.OUTPUTS)
    node.write_outputs({**files, "../escape.txt": b"x"}, tmp_path / "back")
    assert sorted(
        str(p.relative_to(tmp_path / "back")) for p in (tmp_path / "back").rglob("*") if p.is_file()
    ) == sorted(node.OUTPUTS)
    assert not (tmp_path / "escape.txt").exists()


def _result(device: str) -> Result:
    return Result(
        assignment=AssignmentRef(name="a", version="1"),
        submission=SubmissionRef(path="p", sha256="0" * 64),
        environment=RunEnvironment(device=device, torch="t", triton="t", python="3"),
        score=0.0,
        max_score=1.0,
        duration_s=1.0,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[],
    )


def test_the_gradebook_names_node_and_gpu() -> None:
    assert (
        node.where(_result("NVIDIA H200"), "gpu3:5f0c2a1e", "1").environment.device
        == "NVIDIA H200 (node gpu3:5f0c2a1e, GPU 1)"
    )
    assert node.where(_result("cuda (GPU 1)"), "gpu3", "1").environment.device == "cuda (node gpu3, GPU 1)"
    assert node.where(_result("cpu"), "vm", None).environment.device == "cpu (node vm)"


def test_a_node_with_another_spec_refuses_to_grade(tmp_path: Path) -> None:
    from grader.course.batch.context import Context
    from grader.engine.assignment.load import load_assignment
    from grader.engine.orchestrator.launch import GradeCommand
    from grader.engine.spec.model import DEFAULT_SPEC

    assignment = load_assignment()
    command = GradeCommand(spec=DEFAULT_SPEC, device="cpu", problems=("gelu",), secret="s3")
    ctx = Context(assignment, assignment.problems[:1], command, 60.0)
    recipe = node.recipe_for(ctx)
    assert recipe.spec == "assignment/assignment.toml"  # relative: each node finds its own checkout's
    rebuilt = node.node_context(recipe, [tmp_path])
    assert rebuilt.assignment == assignment
    # the driver's command, but for the node's own spec path, hidden paths and kernel cache
    assert rebuilt.command == command.model_copy(update={"spec": rebuilt.spec, "hide": (tmp_path,)})
    with pytest.raises(node.NodeError, match="another spec"):
        node.node_context(dataclasses.replace(recipe, spec_digest="0" * 64), [])
    with pytest.raises(node.NodeError, match="no spec"):
        node.node_context(dataclasses.replace(recipe, spec="nowhere/assignment.toml"), [])


def _batch_of_one(tmp_path: Path, backend: str, *extra: str) -> int:
    """`grader batch` on a class of one (empty) student with `backend`: the exit code."""
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    out = ["--out", str(tmp_path / "out"), "--device", "cpu", "--problems", "gelu"]
    return cli.main(["batch", str(tmp_path / "subs"), *out, "--backend", backend, *extra])


def test_slurm_refuses_docker_before_queueing_anything(tmp_path: Path) -> None:
    code = _batch_of_one(tmp_path, "slurm", "--docker")
    assert code == 2
    assert not (tmp_path / "out" / ".slurm").exists()


@pytest.mark.parametrize("extra", [["--gpus", "0"], ["--jobs", "4"]])
def test_the_engine_places_gradings_not_gpus_or_jobs(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = _batch_of_one(tmp_path, "ray", *extra)
    assert code == 2
    assert "--ray-resources" in capsys.readouterr().err
