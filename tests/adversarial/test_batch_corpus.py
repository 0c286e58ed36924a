"""The batch-level entries of corpus.toml (issue 17): what a hostile class does to `grader batch`.

One submissions folder holds every [[batch]] entry's students, built here (BUILD); it is graded
with `--secret-file` by `grader grade` children one at a time (the default) and in containers two
at once (--docker --jobs 2, marked `docker`: needs the engine and the CPU image
scripts/setup-docker.sh prepares), then graded again:
the second run must finish too and grade nothing new. Each entry's expectations are then checked
against what each mode wrote.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import resource
import secrets
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader import cli
from grader.commands.batch import options_from_args
from grader.course.batch.run import run_batch
from grader.course.containers import docker as containers
from grader.course.containers import image
from grader.engine.records.model import Result

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORRECT_GELU = (ROOT / "examples" / "submissions" / "correct" / "gelu.py").read_bytes()
BATCH: list[dict[str, Any]] = tomllib.loads((HERE / "corpus.toml").read_text())["batch"]
SECRET = "SENTINEL-BATCH-SECRET"
MODES = ["subprocess", "docker"]
ALONE = {"wall_s", "ulimit_as"}  # entries graded in a batch of their own
READ_SECRET = """
try:
    print("SECRET-FILE: GOT", open(@@SECRET_FILE@@).read(), flush=True)
except OSError:
    print("SECRET-FILE: denied", flush=True)
"""


#: a daemon (double fork, new session, empty environment) left by a worker that then hangs; the
#: honest twin runs a helper process that ends by itself, then computes
ORPHAN_TOKEN = f"orphan-daemon-{secrets.token_hex(4)}"
ORPHAN = f"""
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(900)", "{ORPHAN_TOKEN}"], {{}})
    os._exit(0)
os.wait()
time.sleep(900)
"""
HELPER = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)\n"


def _orphans(subs: Path, secret_file: Path) -> None:
    for student, head in (("hangs", ORPHAN), ("hangs-honest", HELPER)):
        (subs / student).mkdir()
        (subs / student / "gelu.py").write_bytes(head.encode() + CORRECT_GELU)


def _hungry_beside_honest(subs: Path, secret_file: Path) -> None:
    for student, head in (("hungry", b"HOLD = bytearray(7 << 30)\n"), ("honest", b"")):
        (subs / student).mkdir()
        (subs / student / "gelu.py").write_bytes(head + CORRECT_GELU)


def _tar_gz(path: Path, files: dict[bytes, bytes]) -> None:
    with tarfile.open(path, "w:gz", encoding="utf-8", errors="surrogateescape") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(os.fsdecode(name))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


def _folder_headers(path: Path, count: int) -> None:
    info = tarfile.TarInfo("d")
    info.type = tarfile.DIRTYPE
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    with gzip.open(path, "wb") as out:
        for _ in range(count // 1000):
            out.write(header * 1000)
        out.write(b"\0" * 1024)


def _userns(subs: Path, secret_file: Path) -> None:
    for student in ("first", "second"):
        shutil.copytree(HERE / "submissions" / "userns-mount", subs / student)


def _secret_reader(subs: Path, secret_file: Path) -> None:
    (subs / "secret-reader").mkdir()
    (subs / "secret-reader" / "gelu.py").write_bytes(
        READ_SECRET.replace("@@SECRET_FILE@@", repr(str(secret_file))).encode() + CORRECT_GELU
    )


BUILD: dict[str, Callable[[Path, Path], None]] = {
    "userns-cache-escape": _userns,
    "surrogate-in-batch": lambda subs, _: shutil.copytree(
        HERE / "submissions" / "surrogate-message", subs / "surrogate"
    ),
    "non-utf8-member": lambda subs, _: _tar_gz(
        subs / "notes.tar.gz", {b"gelu.py": CORRECT_GELU, b"notes_\xff.txt": b"hi\n"}
    ),
    "latin1-archive-name": lambda subs, _: _tar_gz(
        Path(os.fsdecode(bytes(subs) + b"/Jos\xe9.tar.gz")), {b"gelu.py": CORRECT_GELU}
    ),
    "directory-headers": lambda subs, _: _folder_headers(subs / "dirs.tar.gz", 600_000),
    "secret-file-batch": _secret_reader,
    "outlives-its-grading": _orphans,
    "ulimit-on-the-grader": _hungry_beside_honest,
}


def _image() -> None:
    """Build the CPU grading image from this tree; skip (with the reason) where it cannot be built."""
    pytest.importorskip("docker")
    from grader.engine.assignment.load import load_assignment

    try:
        client = containers.docker_client()
        image.build_image(
            load_assignment(hidden=False).assignment.version, cpu=True, log=lambda line: None, client=client
        )
    except (containers.DockerUnavailable, RuntimeError) as exc:
        pytest.skip(
            f"no CPU grading image ({exc}); scripts/setup-docker.sh prepares the engine, the base image and the wheels"
        )


def _batch(subs: Path, out: Path, secret_file: Path, mode: str, more: tuple[str, ...] = ()) -> int:
    extra = {"subprocess": [], "two-at-once": ["--jobs", "2"], "docker": ["--docker", "--jobs", "2"]}[mode]
    extra += more
    argv = [
        "batch",
        str(subs),
        "--out",
        str(out),
        "--device",
        "cpu",
        "--problems",
        "gelu",
        "--secret-file",
        str(secret_file),
        *extra,
    ]
    args = cli.build_parser().parse_args(argv)
    return run_batch(options_from_args(args))


def _outside_tmp(request: pytest.FixtureRequest) -> Path:
    """A folder outside /tmp (which the worker's namespace replaces anyway), world-readable, as a
    staff secret file's folder may be: only the batch's hiding keeps the file from the worker."""
    base = Path("/run") if os.access("/run", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="grader-batch-corpus-", dir=base))
    os.chmod(folder, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


@pytest.fixture(
    scope="module", params=[pytest.param(m, marks=[pytest.mark.docker] if m == "docker" else []) for m in MODES]
)
def graded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path, dict[str, Result]]:
    """The whole class graded twice in one mode; (mode, results folder, student -> result)."""
    mode = request.param
    if mode == "docker":
        _image()
    base = tmp_path_factory.mktemp(f"class-{mode}")
    subs, out = base / "subs", base / "grades"
    subs.mkdir()
    secret_file = _outside_tmp(request) / "secret.txt"
    secret_file.write_text(SECRET + "\n")
    for entry in BATCH:
        if not ALONE & set(entry):  # graded in batches of their own, below
            BUILD[entry["name"]](subs, secret_file)
    assert _batch(subs, out, secret_file, mode) == 0
    first = {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/result.json")}
    assert _batch(subs, out, secret_file, mode) == 0, "a second run stopped"
    assert first == {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/result.json")}, (
        "the second run graded again"
    )
    results = {p.parent.name: Result.model_validate_json(p.read_text()) for p in out.glob("*/result.json")}
    return mode, out, results


def _said(result: Result) -> str:
    gelu = next(p for p in result.problems if p.name == "gelu")
    return "\n".join([result.error, gelu.message, gelu.output, *(t.message for t in gelu.tests)])


@pytest.mark.parametrize("name", [e["name"] for e in BATCH if not ALONE & set(e)])
def test_batch_entry_gets_its_verdict(name: str, graded: tuple[str, Path, dict[str, Result]]) -> None:
    mode, out, results = graded
    entry = next(e for e in BATCH if e["name"] == name)
    for student, status in entry["students"].items():
        assert student in results, f"{student} has no result ({mode}): {sorted(results)}"
        assert results[student].status == status, (
            f"{student} ({mode}): {results[student].status}: {results[student].error}"
        )
    for student, needles in entry.get("error", {}).items():
        for needle in needles:
            assert needle in results[student].error, (mode, results[student].error)
    checks = dict(entry.get("output", {}))
    if mode == "subprocess":  # one at a time: the order of the students is the order of their gradings
        once = entry.get("output_one_at_a_time", {})
        checks = {s: checks.get(s, []) + extra for s, extra in once.items()} | {
            s: v for s, v in checks.items() if s not in once
        }
    for student, needles in checks.items():
        for needle in needles:
            assert needle in _said(results[student]), (
                f"{needle!r} not said for {student} ({mode}):\n{_said(results[student])[:3000]}"
            )
    for needle in entry.get("absent_output", []):
        for student in entry["students"]:
            assert needle not in _said(results[student]), f"{needle!r} in {student}'s output ({mode})"
    for student, names in entry.get("files", {}).items():
        assert set(names) <= set(results[student].submission.files), (mode, results[student].submission.files)
    for needle in entry.get("absent_text", []):
        for path in out.rglob("*"):
            if path.is_file():
                assert needle.encode() not in path.read_bytes(), f"{needle!r} leaked into {path} ({mode})"


@pytest.mark.parametrize("name", [e["name"] for e in BATCH if "wall_s" in e])
def test_a_killed_grading_takes_its_processes_along(name: str, tmp_path: Path) -> None:
    """`--jobs`: a `grader grade` child killed at the batch's wall-clock limit leaves no process behind.

    Its worker and the daemon that worker started (new session, empty environment) ran on after
    the batch returned (issue 29); its honest twin, graded beside it, must be graded as usual.
    """
    entry = next(e for e in BATCH if e["name"] == name)
    subs, out = tmp_path / "subs", tmp_path / "grades"
    subs.mkdir()
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    BUILD[name](subs, secret_file)
    more = ("--container-timeout", str(entry["wall_s"]), "--timeout", str(4 * entry["wall_s"]))
    assert _batch(subs, out, secret_file, "two-at-once", more) == 0
    results = {p.parent.name: Result.model_validate_json(p.read_text()) for p in out.glob("*/result.json")}
    for student, status in entry["students"].items():
        assert results[student].status == status, (student, results[student].error)
    for student, needles in entry.get("error", {}).items():
        assert all(needle in results[student].error for needle in needles), results[student].error
    left = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and ORPHAN_TOKEN.encode() in (proc / "cmdline").read_bytes():
                left.append(proc.name)
        except OSError:
            pass
    assert not left, f"processes outlived the batch: {left}"


@pytest.mark.parametrize("name", [e["name"] for e in BATCH if "ulimit_as" in e])
def test_a_resource_limit_on_the_grader_is_an_infrastructure_row(name: str, tmp_path: Path) -> None:
    """`ulimit -v` below a worker's limit on a batch (and its `grader grade` children): every row an
    infrastructure error that says so (retried on resume), never a silent 0.0; the honest twin, the
    same batch unlimited, is graded."""
    entry = next(e for e in BATCH if e["name"] == name)
    subs = tmp_path / "subs"
    subs.mkdir()
    BUILD[name](subs, tmp_path / "unused")
    for limit, out in ((entry["ulimit_as"], tmp_path / "limited"), (None, tmp_path / "unlimited")):

        def cap(limit: int | None = limit) -> None:
            if limit is not None:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        argv = [sys.executable, "-m", "grader.cli", "batch", str(subs), "--out", str(out), "--device", "cpu"]
        done = subprocess.run(
            [*argv, "--problems", "gelu"], cwd=ROOT, capture_output=True, text=True, preexec_fn=cap, timeout=600
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results = {p.parent.name: Result.model_validate_json(p.read_text()) for p in out.glob("*/result.json")}
        for student in entry["students"]:
            if limit is None:
                assert results[student].status == "graded", (student, results[student].error)
            else:
                assert results[student].status == "error" and results[student].error_kind == "infrastructure"
                assert all(needle in results[student].error for needle in entry["error"][student])


def test_every_batch_entry_is_built_and_in_the_defences_page() -> None:
    page = (ROOT / "docs" / "defenses.md").read_text()
    assert set(BUILD) == {e["name"] for e in BATCH}
    missing = [e["name"] for e in BATCH if f"`{e['name']}`" not in page]
    assert not missing, f"docs/defenses.md does not list {missing}"
    for entry in BATCH:
        assert {"attack", "caught_by", "students"} <= set(entry), entry["name"]


def test_results_are_readable_json_whatever_the_names(graded: tuple[str, Path, dict[str, Result]]) -> None:
    """Every file of the batch decodes as UTF-8 (JSON, HTML), the gradebook included."""
    _mode, out, _results = graded
    for path in [*out.glob("*/result.json"), *out.glob("*/report.html"), out / "gradebook.csv", out / "summary.json"]:
        path.read_bytes().decode("utf-8")
    json.loads((out / "summary.json").read_text())


def test_a_result_that_cannot_be_written_is_that_students_error_row(tmp_path: Path) -> None:
    """Whatever stops a student's result from being written, the batch goes on past it, twice."""
    subs, out = tmp_path / "subs", tmp_path / "grades"
    for student in ("blocked", "later"):
        (subs / student).mkdir(parents=True)
        (subs / student / "gelu.py").write_bytes(CORRECT_GELU)
    out.mkdir()
    (out / "blocked").write_text("a stray file where the student's folder goes\n")
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET)
    for _ in range(2):
        assert _batch(subs, out, secret_file, "subprocess") == 0
        rows = {r["student"]: r for r in csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))}
        assert (
            rows["blocked"]["status"] == "error" and "could not write this student's result" in rows["blocked"]["error"]
        ), rows["blocked"]
        assert rows["later"]["status"] == "graded", rows["later"]
