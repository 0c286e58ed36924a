"""The Gradescope package where it will run: setup.sh and run_autograder in a clean Debian container.

Not the project's venv, not its Python: the local base image of scripts/setup-docker.sh (Debian
bookworm's python3 3.11 and nothing else), laid out as Gradescope lays it out (/autograder/source,
/autograder/submission, /autograder/submission_metadata.json, /autograder/results), with no
network (setup.sh installs from the wheelhouse that scripts/setup-docker.sh downloads) and
Docker's default capabilities, so no mount namespace: the sandbox's "uid" level, as on
Gradescope. One container serves every submission; the environment setup.sh installed is kept as
an image named for the hash of setup.sh and requirements.txt, so it is built once per change of
either. Gradescope's own Ubuntu 22.04 image cannot be pulled here (no registry is reachable).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import cli
from tests.grader.course import gradescope_schema

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BASE_IMAGE = os.environ.get("CPU_BASE_IMAGE", "triton-kernels-cpu-base:bookworm")
WHEELS = Path(os.environ.get("GRADER_WHEELHOUSE") or ROOT / "docker" / "wheels")

# A GeLU that tries to read the hidden cases from the package, at import and in every call, and
# puts whatever it read into an error message (which a student would see in the test's output).
SNOOP = """
import torch
from pathlib import Path

def _read():
    try:
        return Path("/autograder/source/assignment/hidden_cases.toml").read_text()[:2000]
    except OSError as exc:
        return f"unreadable: {type(exc).__name__}"

FOUND = _read()
print("SNOOP at import:", FOUND)

def triton_gelu(x):
    raise RuntimeError("SNOOP in call: " + FOUND + " / " + _read())
"""
# A GeLU whose import kills its own process (a segfault, as a bad pointer in a kernel would).
CRASH = "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n"


def docker(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"docker {' '.join(args[:3])} failed: {proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return proc


def _requirements_met() -> str | None:
    if shutil.which("docker") is None:
        return "no docker command (scripts/setup-docker.sh installs one)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no Docker engine answers (scripts/setup-docker.sh starts one)"
    if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
        return f"the base image {BASE_IMAGE} is missing: run scripts/setup-docker.sh"
    if not list(WHEELS.glob("torch-*.whl")):
        return f"{WHEELS} has no torch wheel: run scripts/setup-docker.sh (or set GRADER_WHEELHOUSE)"
    return None


def _env_image(package: Path) -> str:
    """The base image with setup.sh's environment installed: built once per setup.sh and requirements."""
    with zipfile.ZipFile(package) as zf:
        key = hashlib.sha256(zf.read("setup.sh") + zf.read("requirements.txt")).hexdigest()[:16]
    tag = f"triton-kernels-gradescope-env:{key}"
    if subprocess.run(["docker", "image", "inspect", tag], capture_output=True).returncode == 0:
        return tag
    name = f"gradescope-setup-{key}"
    docker("rm", "-f", name, check=False)
    setup = (
        "set -e; mkdir -p /autograder && python3 -m zipfile -e /pkg/autograder.zip /autograder/source && "
        "GRADER_WHEELHOUSE=/wheels bash /autograder/source/setup.sh"
    )
    mounts = ["-v", f"{package.parent}:/pkg:ro", "-v", f"{WHEELS.resolve()}:/wheels:ro"]
    try:
        proc = docker("run", "--name", name, "--network", "none", *mounts, BASE_IMAGE, "bash", "-c", setup, check=False)
        assert proc.returncode == 0, f"setup.sh failed in {BASE_IMAGE}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
        assert "setup.sh: 3.11" in proc.stdout and "2.11.0" in proc.stdout, proc.stdout
        docker("commit", name, tag)
    finally:
        docker("rm", "-f", name, check=False)
    return tag


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reason = _requirements_met()
    if reason:
        pytest.skip(reason)
    build = tmp_path_factory.mktemp("gradescope-package")
    assert cli.main(["gradescope-autograder", "--out", str(build)]) == 0
    image = _env_image(build / "autograder.zip")
    name = f"gradescope-run-{os.getpid()}"
    # the zip unpacked afresh (this run's grader, over the environment setup.sh installed), and
    # run_autograder copied where Gradescope copies it
    start = (
        "rm -rf /autograder/source && python3 -m zipfile -e /pkg/autograder.zip /autograder/source && "
        "cp /autograder/source/run_autograder /autograder/run_autograder && sleep 3600"
    )
    docker(
        "run", "-d", "--rm", "--name", name, "--network", "none", "-v", f"{build}:/pkg:ro", image, "bash", "-c", start
    )
    try:
        docker(
            "exec",
            name,
            "bash",
            "-c",
            "for i in $(seq 60); do [ -f /autograder/source/run_autograder ] && exit 0; sleep 1; done; exit 1",
        )
        yield name
    finally:
        docker("rm", "-f", name, check=False)


def grade_in(container: str, files: dict[str, str] | Path | None) -> dict:
    """One Gradescope run: the upload in /autograder/submission, run_autograder, results.json."""
    docker(
        "exec",
        container,
        "bash",
        "-c",
        "rm -rf /autograder/submission /autograder/results; mkdir -p /autograder/submission",
    )
    if isinstance(files, Path):
        docker("cp", f"{files}/.", f"{container}:/autograder/submission/")
    for name, text in (files or {}).items() if isinstance(files, dict) else []:
        subprocess.run(
            ["docker", "exec", "-i", container, "bash", "-c", f"cat > /autograder/submission/{name}"],
            input=text,
            text=True,
            check=True,
        )
    metadata = json.dumps({"id": 1, "users": [{"email": "ada@uni.edu", "id": 7, "name": "Ada"}]})
    subprocess.run(
        ["docker", "exec", "-i", container, "bash", "-c", "cat > /autograder/submission_metadata.json"],
        input=metadata,
        text=True,
        check=True,
    )
    run = docker(
        "exec",
        "-e",
        "GRADER_PROBLEMS=gelu",
        container,
        "bash",
        "-c",
        "cd /autograder && bash /autograder/run_autograder",
    )
    data = json.loads(docker("exec", container, "cat", "/autograder/results/results.json").stdout)
    assert gradescope_schema.check(data) == [], data
    data["_stdout"] = run.stdout + run.stderr
    return data


def test_the_correct_example_gets_full_correctness_in_a_clean_container(container: str) -> None:
    data = grade_in(container, ROOT / "examples" / "submissions" / "correct")
    assert data["score"] == 10.0 and data["extra_data"]["status"] == "graded", data["output"]
    assert any(t.get("visibility") == "after_published" for t in data["tests"])
    assert "hidden tests were graded too" in data["output"]


def test_a_broken_submission_is_graded_with_its_reason(container: str) -> None:
    data = grade_in(container, ROOT / "examples" / "submissions" / "broken")
    assert data["score"] == 0.0 and data["extra_data"]["status"] == "graded"
    assert any("SyntaxError" in t.get("output", "") for t in data["tests"]), data["tests"][:2]


def test_an_empty_submission_is_not_graded_and_says_why(container: str) -> None:
    data = grade_in(container, None)
    assert data["score"] == 0.0 and data["extra_data"]["failure"] == "no_submission"
    assert "empty" in data["output"] and "gelu.py" in data["output"]


def test_a_submission_that_crashes_costs_its_problem_with_a_reason(container: str) -> None:
    data = grade_in(container, {"gelu.py": CRASH})
    assert data["score"] == 0.0 and data["extra_data"]["status"] == "graded"
    gelu = [t for t in data["tests"] if t["name"].startswith("gelu") and "performance" not in t["name"]]
    assert gelu and all(t["status"] == "failed" and t["output"] for t in gelu)


def test_a_submission_cannot_read_the_hidden_cases_of_the_package(container: str) -> None:
    """The adversarial case of issue 29; its honest twin is the correct example above (full marks)."""
    hidden = docker("exec", container, "cat", "/autograder/source/assignment/hidden_cases.toml").stdout
    case_names = [line.split('"')[1] for line in hidden.splitlines() if line.startswith("name =")]
    data = grade_in(container, {"gelu.py": SNOOP})
    text = json.dumps(data)
    assert "SNOOP in call: unreadable: PermissionError" in text, text[:3000]
    assert case_names and not any(f'name = "{n}"' in text for n in case_names)
    assert "[[hidden." not in text
