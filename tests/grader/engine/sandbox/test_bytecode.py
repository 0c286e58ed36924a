"""The worker's bytecode, kept once per machine (`grader.engine.sandbox.bytecode`): filled by importing
what a worker imports, readable by every worker and writable by none, used only by a worker under
another uid than the orchestrator's."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT
from grader.engine.sandbox import bytecode


@pytest.fixture
def kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "bytecode"
    monkeypatch.setenv(bytecode.ENV, str(where))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as on machines whose packages have no .pyc
    monkeypatch.setattr(bytecode, "_FILLED", {})
    return where


def test_it_is_filled_once_with_the_workers_imports_and_opened_read_only(kept: Path) -> None:
    assert bytecode.ready() == kept
    compiled = list(kept.rglob("*.pyc"))
    names = {p.name.split(".")[0] for p in compiled}
    assert {"serve", "calls", "watch"} <= names  # the harness
    assert len(compiled) > 500  # and PyTorch's modules with it
    for path in [kept, *compiled[:50]]:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert not mode & (stat.S_IWGRP | stat.S_IWOTH) and mode & stat.S_IROTH, (path, oct(mode))
    assert [p.name for p in kept.glob("filled-*")], "the marker that spares the next grading the fill"
    # the orchestrator's own start reads it too: PyTorch and the grading's modules come from the folder
    probe = (
        "import sys; from grader.engine.sandbox import bytecode; assert bytecode.use_here(only_where_needed=False); "
        "import torch, grader.engine.orchestrator.grade as g; print(torch.__spec__.cached); print(g.__spec__.cached)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    for cached in out.stdout.split():
        assert cached.startswith(str(kept)) and Path(cached).is_file(), cached


def test_only_a_worker_under_another_uid_reads_it(kept: Path) -> None:
    assert bytecode.worker_flags(None, namespace=True) == []
    assert bytecode.worker_flags(os.geteuid(), namespace=True) == []  # it could write bytecode the next worker runs
    # without a namespace the folder is not bound in (Gradescope's uid level: /root is out of reach)
    assert bytecode.worker_flags(os.geteuid() + 12345, namespace=False) == []
    flags = bytecode.worker_flags(os.geteuid() + 12345, namespace=True)
    assert flags == ["-B", "-X", f"pycache_prefix={kept}"]


def test_the_orchestrator_uses_only_a_filled_folder(kept: Path) -> None:
    before = sys.pycache_prefix
    assert not bytecode.use_here(only_where_needed=False)  # nothing filled: imports stay where they were
    assert sys.pycache_prefix == before


def test_the_orchestrator_keeps_the_packages_own_bytecode_where_they_have_it(kept: Path) -> None:
    """This machine's PyTorch ships its bytecode: the folder, which lacks Ray's, the web stack's and
    the rest, would make every `grader` start compile them from source."""
    kept.mkdir()
    (kept / f"filled-{bytecode._versions()}").write_text("")
    before = sys.pycache_prefix
    assert bytecode._torch_ships_bytecode()
    assert not bytecode.use_here()
    assert sys.pycache_prefix == before


def test_a_folder_that_cannot_be_made_leaves_workers_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(bytecode.ENV, str(blocker / "inside"))
    monkeypatch.setattr(bytecode, "_FILLED", {})
    assert bytecode.ready() is None
    assert bytecode.worker_flags(os.geteuid() + 1, namespace=True) == []


def test_another_interpreter_or_checkout_fills_it_again(kept: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = bytecode._versions()
    monkeypatch.setattr(bytecode.sys, "prefix", "/elsewhere/.venv")
    assert bytecode._versions() != first  # its packages live elsewhere: the folder has none of their bytecode
