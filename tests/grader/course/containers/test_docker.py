"""Grading in containers: the container configuration (always), and a small class graded end to end
in the CPU image (`docker` marker: needs a Docker engine, the local CPU base image and the wheels
that scripts/setup-docker.sh prepares; skipped with the reason otherwise)."""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader import cli
from grader.commands.batch import options_from_args
from grader.course.batch.discovery import WORK
from grader.course.batch.run import run_batch
from grader.course.batch.runners import DockerRunner
from grader.course.containers import docker as containers
from grader.course.containers import gpus, runner
from grader.course.containers import image as images
from grader.engine.assignment.load import load_assignment
from grader.engine.records.model import Result

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[4]
CORRECT = ROOT / "examples" / "submissions" / "correct"
VERSION = load_assignment(hidden=False).assignment.version
BUILT: dict[str, str] = {}

# Runs `grader batch` as cli.py would, with the batch parser of grader/commands/batch.py.
HARNESS = """
import argparse, sys
from grader.commands import batch as command
parser = argparse.ArgumentParser(prog="grader")
command.add_parser(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
try:
    sys.exit(args.func(args))
except KeyboardInterrupt:
    sys.exit(130)
"""

# A correct GeLU that first probes its sandbox from inside the worker and prints what it found.
PROBE = """
import os, socket
from pathlib import Path

_found = []


def _probe(name, action):
    try:
        action()
        _found.append(f"PROBE {name}: OPEN")
    except Exception as exc:
        _found.append(f"PROBE {name}: blocked ({type(exc).__name__})")


_probe("network", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2).close())
_probe("reference", lambda: Path("/opt/grader/reference/gelu.py").read_bytes())
_probe("hidden-cases", lambda: Path("/opt/grader/assignment/hidden_cases.toml").read_bytes())
_probe("write-out", lambda: Path("/out/result.json").write_text("{}"))
_probe("list-out", lambda: os.listdir("/out"))
_probe("write-submission", lambda: Path("/submission/x.txt").write_text("x"))
_probe("init-environ", lambda: Path("/proc/1/environ").read_bytes())
_found.append("PROBE secret-in-env: " + ("OPEN" if "GRADER_SECRET" in os.environ else "blocked"))
_found.append("NET-INTERFACES " + ",".join(sorted(os.listdir("/sys/class/net"))))
print("\\n".join(_found), flush=True)
"""


# -- the container configuration: no engine needed ---------------------------------------------------


def test_gpu_container_config() -> None:
    pytest.importorskip("docker")
    job = runner.ContainerJob(
        student="alice",
        submission=Path("/srv/subs/alice"),
        out=Path("/srv/grades/.work/alice/out"),
        image="triton-kernels-grader:2026.1",
        args=["grade", "/submission", "--out", "/out", "--device", "cuda", "--worker-user", "grader-worker"],
        gpu="3",
        env={"GRADER_SECRET": "s3cret"},
        batch_label="b1",
    )
    limits = runner.ContainerLimits(memory="24g", pids=2048, cpus=4.0, wall_s=600)
    config = runner.container_config(job, limits)
    (request,) = config["device_requests"]
    assert (
        request["DeviceIDs"] == ["3"] and request["Capabilities"] == [["gpu"]] and request["Count"] == 0
    )  # as `docker run --gpus device=3` sends it
    assert config["network_mode"] == "none"
    assert config["volumes"]["/srv/subs/alice"] == {"bind": "/submission", "mode": "ro"}
    assert config["volumes"]["/srv/grades/.work/alice/out"] == {"bind": "/out", "mode": "rw"}
    assert config["mem_limit"] == "24g" and config["memswap_limit"] == "24g"
    assert config["pids_limit"] == 2048 and config["nano_cpus"] == 4_000_000_000
    assert config["read_only"] is True and "/tmp" in config["tmpfs"]
    assert config["cap_drop"] == ["ALL"] and "SYS_ADMIN" not in config["cap_add"] and "NET_RAW" not in config["cap_add"]
    assert "no-new-privileges" in config["security_opt"]
    assert config["environment"]["GRADER_SECRET"] == "s3cret"
    assert not any("s3cret" in a for a in config["command"])  # argv is visible to every user
    assert config["labels"][containers.LABEL_BATCH] == "b1"
    assert "entrypoint" not in config


def test_cpu_container_config_has_no_device_request() -> None:
    pytest.importorskip("docker")
    job = runner.ContainerJob("bob", Path("/s"), Path("/o"), "img", ["grade"])
    config = runner.container_config(job, runner.ContainerLimits())
    assert "device_requests" not in config
    assert config["network_mode"] == "none"


def test_parse_gpus() -> None:
    assert gpus.parse_gpus(None) == []
    assert gpus.parse_gpus("0,1, 3") == ["0", "1", "3"]
    assert gpus.parse_gpus("all", probe=lambda: ["0", "1"]) == ["0", "1"]
    with pytest.raises(RuntimeError, match="no NVIDIA GPU"):
        gpus.parse_gpus("all", probe=lambda: [])
    with pytest.raises(RuntimeError, match="twice"):
        gpus.parse_gpus("1,1")


def test_gpu_batch_gives_each_container_its_own_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--docker --gpus 0,1`: two slots, one GPU each, no engine touched (the runner is faked)."""
    pytest.importorskip("docker")
    seen: list[dict[str, Any]] = []

    class FakeContainerRunner:
        def __init__(self, client: Any, limits: runner.ContainerLimits) -> None:
            self.limits = limits
            self.stopping = __import__("threading").Event()

        def run(self, job: runner.ContainerJob) -> runner.ContainerOutcome:
            seen.append(runner.container_config(job, self.limits))
            return runner.ContainerOutcome(exit_code=3, logs="fake: no engine here")

        def kill_all(self) -> int:
            return 0

    class FakeImage:
        labels = {containers.LABEL_VERSION: VERSION, containers.LABEL_CONTENT: "", containers.LABEL_VARIANT: "gpu"}

    class FakeClient:
        images = type("Images", (), {"get": staticmethod(lambda tag: FakeImage())})()
        containers = type("Containers", (), {"list": staticmethod(lambda **kw: [])})()

    monkeypatch.setattr(runner, "ContainerRunner", FakeContainerRunner)
    monkeypatch.setattr(containers, "docker_client", lambda timeout=60: FakeClient())
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("a", "b", "c"):
        shutil.copytree(CORRECT, subs / name)
    args = _parse(
        "batch", str(subs), "--out", str(out), "--docker", "--gpus", "0,1", "--problems", "gelu", "--memory", "32g"
    )
    assert run_batch(options_from_args(args)) == 0
    assert len(seen) == 3
    assert {c["device_requests"][0]["DeviceIDs"][0] for c in seen} <= {"0", "1"}
    assert all(r["gpu"] in ("cuda (GPU 0)", "cuda (GPU 1)") for r in _gradebook(out).values())
    assert all(c["image"] == images.image_tag(VERSION, cpu=False) for c in seen)
    assert all("--device" in c["command"] and c["command"][c["command"].index("--device") + 1] == "cuda" for c in seen)
    assert all(c["mem_limit"] == "32g" and c["network_mode"] == "none" for c in seen)
    rows = _gradebook(out)
    assert all(r["status"] == "error" and "exited with code 3" in r["error"] for r in rows.values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "docker" and summary["gpus"] == ["0", "1"]


def test_image_context_holds_only_what_the_image_needs(tmp_path: Path) -> None:
    images.stage_context(ROOT, tmp_path, cpu=False)
    top = {p.name for p in tmp_path.iterdir()}
    assert top == {"docker", "grader", "assignment", "reference"}
    assert (tmp_path / "docker" / "Dockerfile").exists()
    assert not list(tmp_path.rglob("__pycache__"))
    assert len(images.content_hash(ROOT)) == 16


# -- end to end in the CPU image ---------------------------------------------------------------------


def _parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def _gradebook(out: Path) -> dict[str, dict[str, str]]:
    return {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}


def _label(out: Path) -> str:
    return hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]


@pytest.fixture(scope="session")
def engine() -> Any:
    pytest.importorskip("docker")
    try:
        return containers.docker_client()
    except containers.DockerUnavailable as exc:
        pytest.skip(f"no Docker engine: {exc} (scripts/setup-docker.sh starts one)")


@pytest.fixture(scope="session")
def image(engine: Any) -> str:
    """The CPU grading image, built from this checkout (layers cached: seconds when only the grader changed)."""
    try:
        engine.images.get(containers.CPU_BASE_IMAGE)
    except Exception:
        pytest.skip(f"the CPU base image {containers.CPU_BASE_IMAGE} is missing: run scripts/setup-docker.sh")
    if not list((ROOT / "docker" / "wheels").glob("torch-*.whl")):
        pytest.skip("docker/wheels/ has no torch wheel: run scripts/setup-docker.sh")
    BUILT["content"] = images.content_hash()  # before the build: the tree may change under a long run
    return images.build_image(VERSION, cpu=True, log=lambda line: None, client=engine)


def _run_batch(subs: Path, out: Path, *extra: str) -> int:
    args = _parse("batch", str(subs), "--out", str(out), "--docker", "--problems", "gelu", *extra)
    return run_batch(options_from_args(args))


def _leftover_containers(engine: Any, out: Path) -> list[Any]:
    return engine.containers.list(all=True, filters={"label": f"{containers.LABEL_BATCH}={_label(out)}"})


@pytest.fixture
def secret(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GRADER_SECRET", "container-test-secret")
    return "container-test-secret"


@pytest.mark.docker
def test_image_is_tagged_and_keeps_secrets_root_only(engine: Any, image: str) -> None:
    info = images.inspect_image(engine, image)
    assert image.endswith(f":{VERSION}-cpu") and info.version == VERSION and info.variant == "cpu"
    assert info.content == BUILT["content"]
    out = engine.containers.run(
        image,
        entrypoint=[
            "/bin/sh",
            "-c",
            "stat -c '%a %U %n' /opt/grader/reference /opt/grader/assignment/hidden_cases.toml "
            "/opt/grader/grader; id grader-worker",
        ],
        network_mode="none",
        remove=True,
    ).decode()
    assert "700 root /opt/grader/reference" in out
    assert "600 root /opt/grader/assignment/hidden_cases.toml" in out
    assert "755 root /opt/grader/grader" in out
    assert "uid=61000(grader-worker)" in out


@pytest.mark.docker
def test_a_small_class_in_containers(engine: Any, image: str, tmp_path: Path, secret: str) -> None:
    subs, out = tmp_path / "subs", tmp_path / "grades"
    shutil.copytree(CORRECT, subs / "correct")
    # an archive with the submission one folder down
    with tarfile.open(subs / "nested.tar.gz", "w:gz") as tf:
        for path in CORRECT.glob("*.py"):
            tf.add(path, arcname=f"nested/{path.name}")
    # a kernel that never returns
    shutil.copytree(CORRECT, subs / "hang")
    (subs / "hang" / "gelu.py").write_text("def triton_gelu(x):\n    while True:\n        pass\n")
    # a correct kernel that tries the network and the grader's secrets first
    shutil.copytree(CORRECT, subs / "probe")
    (subs / "probe" / "gelu.py").write_text(PROBE + (CORRECT / "gelu.py").read_text())
    # archives that try to escape their folder
    with zipfile.ZipFile(subs / "slip.zip", "w") as zf:
        zf.writestr("gelu.py", "x = 1\n")
        zf.writestr("../../escaped.py", "pwned = True\n")
    with tarfile.open(subs / "symlink.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("gelu.py")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
        info = tarfile.TarInfo("up")
        info.type = tarfile.SYMTYPE
        info.linkname = "../../.."
        tf.addfile(info)

    # the limit is the hang's and the correct students' alike (one problem); a worker's imports are
    # outside it (stop 36's loaded CI spent 43 s in them and zeroed the correct student before)
    started = time.monotonic()
    assert _run_batch(subs, out, "--timeout", "45", "--jobs", "2") == 0
    first_run = time.monotonic() - started
    book = _gradebook(out)
    assert set(book) == {"correct", "nested", "hang", "probe", "slip", "symlink"}

    for student in ("correct", "nested", "probe"):
        assert book[student]["status"] == "graded", book[student]
        assert float(book[student]["gelu"]) == 10.0, book[student]
        assert book[student]["gpu"] == "cpu"
        result = Result.model_validate_json((out / student / "result.json").read_text())
        assert result.environment.isolation == "uid" and result.environment.interpreter
        assert (out / student / "report.html").exists() and (out / student / "gradescope" / "results.json").exists()

    # the hang costs its problem, with the reason, and the student still gets a graded row
    hang = Result.model_validate_json((out / "hang" / "result.json").read_text())
    assert hang.status == "graded" and hang.score == 0
    assert hang.problems[0].status == "error" and "time limit" in json.dumps(hang.model_dump())

    # the probe ran inside the worker: no network, no secrets, no results folder
    output = Result.model_validate_json((out / "probe" / "result.json").read_text()).problems[0].output
    probes = [line for line in output.splitlines() if line.startswith("PROBE ")]
    assert len(probes) == 8, output
    assert not [line for line in probes if line.endswith("OPEN")], probes
    assert "NET-INTERFACES lo" in output
    assert "PROBE network: blocked" in output

    # bad archives: error rows with the reason, nothing written outside
    assert book["slip"]["status"] == "error" and "'..'" in book["slip"]["error"]
    assert book["symlink"]["status"] == "error" and "symbolic link" in book["symlink"]["error"]
    assert not list(tmp_path.rglob("escaped.py")) and not Path("/escaped.py").exists()
    assert Result.model_validate_json((out / "slip" / "result.json").read_text()).status == "error"

    assert not _leftover_containers(engine, out)
    assert not (out / WORK).exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "docker" and summary["default_secret"] is False and summary["students"] == 6

    # a second run grades nothing: every row is already there
    stamps = {s: (out / s / "result.json").stat().st_mtime_ns for s in book}
    started = time.monotonic()
    assert _run_batch(subs, out, "--timeout", "45", "--jobs", "2") == 0
    assert time.monotonic() - started < first_run / 2
    assert stamps == {s: (out / s / "result.json").stat().st_mtime_ns for s in book}


@pytest.mark.docker
def test_container_past_its_wall_clock_is_killed(engine: Any, image: str, tmp_path: Path, secret: str) -> None:
    subs, out = tmp_path / "subs", tmp_path / "grades"
    shutil.copytree(CORRECT, subs / "slow")
    (subs / "slow" / "gelu.py").write_text("import time\ntime.sleep(600)\n")
    started = time.monotonic()
    assert _run_batch(subs, out, "--timeout", "300", "--container-timeout", "5") == 0
    assert time.monotonic() - started < 60
    row = _gradebook(out)["slow"]
    assert row["status"] == "error" and "wall-clock limit of 5 s" in row["error"]
    assert not _leftover_containers(engine, out)


@pytest.mark.docker
@pytest.mark.parametrize(
    "script, reason",
    [
        ("echo '{\"schema_version\": 1, garbage' > /out/result.json", "not a valid result record"),
        ("echo the grader fell over >&2; exit 3", "exited with code 3"),
        ("true", "wrote no result.json"),
    ],
    ids=["garbage", "crash", "nothing"],
)
def test_a_container_that_misbehaves_is_an_error_row(
    engine: Any, image: str, tmp_path: Path, secret: str, monkeypatch: pytest.MonkeyPatch, script: str, reason: str
) -> None:
    monkeypatch.setattr(DockerRunner, "entrypoint", ["/bin/sh", "-c", script])
    subs, out = tmp_path / "subs", tmp_path / "grades"
    shutil.copytree(CORRECT, subs / "victim")
    shutil.copytree(CORRECT, subs / "other")
    assert _run_batch(subs, out) == 0
    book = _gradebook(out)
    for student in ("victim", "other"):
        assert book[student]["status"] == "error" and reason in book[student]["error"], book[student]
        assert book[student]["total"] == ""  # not graded: an empty cell, never a zero
    if "fell over" in script:
        assert "fell over" in Result.model_validate_json((out / "victim" / "result.json").read_text()).error
    assert not _leftover_containers(engine, out)


@pytest.mark.docker
def test_ctrl_c_removes_the_containers_and_a_rerun_finishes(
    engine: Any, image: str, tmp_path: Path, secret: str
) -> None:
    subs, out = tmp_path / "subs", tmp_path / "grades"
    shutil.copytree(CORRECT, subs / "alice")
    shutil.copytree(CORRECT, subs / "bob")
    argv = [
        sys.executable,
        "-c",
        HARNESS,
        "batch",
        str(subs),
        "--out",
        str(out),
        "--docker",
        "--problems",
        "gelu",
        "--jobs",
        "2",
        "--timeout",
        "60",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not [c for c in _leftover_containers(engine, out) if c.status == "running"]:
            assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
            assert time.monotonic() < deadline, "no grading container started within 60 s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        text = proc.communicate(timeout=60)[0].decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, text
    assert "interrupted" in text
    assert not _leftover_containers(engine, out)
    book = _gradebook(out)
    assert {r["status"] for r in book.values()} <= {"missing", "graded"}
    assert json.loads((out / "summary.json").read_text())["interrupted"] is True
    assert _run_batch(subs, out, "--jobs", "2", "--timeout", "60") == 0
    assert all(r["status"] == "graded" and float(r["gelu"]) == 10.0 for r in _gradebook(out).values())


@pytest.mark.docker
def test_containers_left_by_a_killed_batch_are_removed(engine: Any, image: str, tmp_path: Path, secret: str) -> None:
    subs, out = tmp_path / "subs", tmp_path / "grades"
    subs.mkdir()
    out.mkdir()
    stray = engine.containers.run(
        image,
        entrypoint=["sleep", "300"],
        network_mode="none",
        detach=True,
        labels={containers.LABEL_BATCH: _label(out)},
    )
    try:
        assert _run_batch(subs, out) == 0  # an empty class: nothing to grade, but the stray goes
        assert not _leftover_containers(engine, out)
        assert json.loads((out / "summary.json").read_text())["students"] == 0
    finally:
        try:
            stray.remove(force=True)
        except Exception:
            pass


@pytest.fixture(autouse=True)
def _no_stray_containers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Whatever a docker test does, no container of its batches outlives it."""
    yield
    if "engine" in request.fixturenames:
        client = request.getfixturevalue("engine")
        for container in _leftover_containers(client, tmp_path / "grades"):
            container.remove(force=True)
