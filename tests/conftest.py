"""Shared fixtures for the framework's own tests."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

# Without a GPU, kernels run in-process through Triton's interpreter, as `pytest handout` does:
# Triton reads the flag once, when it is first imported (its own library functions included), so
# it is set here, before any test imports it. Workers and child processes get it from the grader.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# Under pytest-xdist (scripts/test) a worker's environment says it is one, and every pytest the
# tests start (the handout, a student's run) would inherit it: pytest-benchmark then disables
# itself there, as if that run were split across processes. The children are single runs.
for _name in [name for name in os.environ if name.startswith("PYTEST_XDIST_")]:
    del os.environ[_name]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "submissions"


#: the test files that take minutes, slowest first (CI, stop 36: the seconds are their share of a
#: 41-minute run on two loaded cores). scripts/test runs two test processes that take a file at a
#: time in collection order: starting with these keeps one long file from running alone at the end.
SLOWEST_FIRST = (
    "tests/adversarial/test_corpus.py",  # the adversarial corpus, graded once for the file: ~900 s
    "tests/adversarial/test_batch_corpus.py",  # batches in-process, in subprocesses, in containers: ~850 s
    "tests/honest/test_corpus.py",  # ~400 s
    "tests/grader/course/cluster/test_ray_backend.py",  # two real Ray nodes, one killed: ~300 s
    "tests/grader/course/cluster/test_slurm_backend.py",  # ~200 s
    "tests/grader/course/containers/test_docker.py",  # ~200 s
    "tests/grader/course/batch/test_class_walkthrough.py",
    "tests/grader/course/batch/test_batch.py",
    "tests/grader/course/service/test_serve.py",
)


def _slowest_first(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return SLOWEST_FIRST.index(path) if path in SLOWEST_FIRST else len(SLOWEST_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_slowest_first)  # stable: a file's tests keep their order, and the rest theirs
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def _private_kernel_cache(tmp_path_factory: pytest.TempPathFactory):
    """Gradings in the tests keep compiled kernels in a folder of their own, not the user's cache."""
    import os

    from grader.engine import kernel_cache

    before = os.environ.get(kernel_cache.ENV)
    os.environ[kernel_cache.ENV] = str(tmp_path_factory.mktemp("kernel-cache"))
    yield
    if before is None:
        os.environ.pop(kernel_cache.ENV, None)
    else:
        os.environ[kernel_cache.ENV] = before


@pytest.fixture(autouse=True, scope="session")
def _private_reference_cache(tmp_path_factory: pytest.TempPathFactory):
    """GPU gradings in the tests compile the reference into a folder of their own: a test process
    also runs student code, which must never reach the machine's reference cache."""
    import os

    from grader.engine.judge import reference_cache

    names = (
        reference_cache.ENV,
        reference_cache.BASE_ENV,
        "TRITON_CACHE_DIR",
        "TRITON_CACHE_AUTOTUNING",
        "TRITON_CACHE_MANAGER",
    )
    before = {name: os.environ.get(name) for name in names}
    os.environ[reference_cache.ENV] = str(tmp_path_factory.mktemp("reference-cache"))
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def make_submission(tmp_path: Path):
    """make_submission(gelu="source", ...) -> a submission folder; unnamed files are stubs."""

    def make(base: str = "student_template", **files: str) -> Path:
        folder = tmp_path / f"sub{len(list(tmp_path.iterdir()))}"
        shutil.copytree(ROOT / base if base == "student_template" else EXAMPLES / base, folder)
        for name, source in files.items():
            (folder / f"{name}.py").write_text(source)
        return folder

    return make


@pytest.fixture(scope="session")
def graded_reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """reference/ graded (GeLU only, to stay quick) through the real CLI; returns the out folder."""
    from grader.cli import main

    out = tmp_path_factory.mktemp("graded-reference")
    assert main(["grade", str(ROOT / "reference"), "--out", str(out), "--problems", "gelu"]) == 0
    return out
