"""The uid level's start-up check: a probe running as the worker's uid must fail to open every hidden path."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.engine.sandbox import exposure

NOBODY = 65534
# a Python outside /root (0700 here), which the probe's uid can run
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/usr/local/bin")
needs_root = pytest.mark.skipif(os.geteuid() != 0 or SYSTEM_PYTHON is None, reason="runs the probe as another uid")


@pytest.fixture
def package() -> Iterator[Path]:
    """A package laid out as an unzip would leave it: some files world-readable, some not."""
    root = Path(tempfile.mkdtemp(prefix="exposure-", dir="/tmp"))
    root.chmod(0o755)
    (root / "hidden_cases.toml").write_text("[[hidden.gelu]]\n")
    (root / "hidden_cases.toml").chmod(0o644)
    (root / "secret.txt").write_text("s")
    (root / "secret.txt").chmod(0o600)
    (root / "reference").mkdir(mode=0o711)
    (root / "reference" / "gelu.py").write_text("x = 1\n")
    (root / "reference" / "gelu.py").chmod(0o644)  # the folder cannot be listed, the file opens by name
    (root / "results").mkdir(mode=0o700)
    try:
        yield root
    finally:
        shutil.rmtree(root)


@needs_root
def test_the_probe_finds_what_the_worker_could_read(package: Path) -> None:
    hide = [package / "hidden_cases.toml", package / "secret.txt", package / "reference", package / "results"]
    paths = exposure.probe_paths(hide)
    assert package / "reference" / "gelu.py" in paths  # files below a hidden folder are probed by name
    found = exposure.readable_as(NOBODY, NOBODY, paths, python=SYSTEM_PYTHON)  # type: ignore[arg-type]
    assert sorted(found) == sorted([str(package / "hidden_cases.toml"), str(package / "reference" / "gelu.py")])


@needs_root
def test_owner_only_files_pass_the_check(package: Path) -> None:
    """The honest twin: the same layout made root-only, as the Gradescope package makes it."""
    for path in (package / "hidden_cases.toml", package / "reference" / "gelu.py"):
        path.chmod(0o600)
    hide = [package / "hidden_cases.toml", package / "secret.txt", package / "reference", package / "results"]
    assert exposure.readable_as(NOBODY, NOBODY, exposure.probe_paths(hide), python=SYSTEM_PYTHON) == []  # type: ignore[arg-type]


def test_a_probe_that_cannot_run_counts_as_exposed(package: Path) -> None:
    found = exposure.readable_as(NOBODY, NOBODY, [package / "secret.txt"], python="/nonexistent/python")
    assert len(found) == 1 and found[0].startswith("(unchecked")


def test_the_refusal_names_the_paths(monkeypatch: pytest.MonkeyPatch, package: Path) -> None:
    monkeypatch.setattr(exposure, "readable_as", lambda uid, gid, paths: [str(package / "hidden_cases.toml")])
    with pytest.raises(exposure.HiddenPathsExposed, match="refusing to grade.*hidden_cases.toml.*chmod -R go="):
        exposure.refuse_if_exposed([package / "hidden_cases.toml"], NOBODY, NOBODY)
