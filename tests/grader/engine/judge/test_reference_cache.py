"""The reference's Triton cache: one folder per machine, read through Triton's own cache manager.

CPU-only: the kernels themselves compile only on a GPU (docs/performance.md has the H200 steps),
but where Triton puts and finds its files is the same code here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.judge import reference_cache

ROOT = Path(__file__).resolve().parents[4]
KEY = "0123456789abcdef" * 4  # Triton keys its cache by a hex hash


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """activate() writes these into the process environment: give them back afterwards."""
    for name in (
        "TRITON_CACHE_DIR",
        "TRITON_CACHE_AUTOTUNING",
        "TRITON_CACHE_MANAGER",
        reference_cache.BASE_ENV,
        reference_cache.ENV,
    ):
        monkeypatch.setenv(name, "placeholder")
        monkeypatch.delenv(name)


def _fill(folder: Path) -> dict[str, str]:
    """What a grading leaves in the cache: a compiled file and the group that lists it."""
    from triton.runtime.cache import get_cache_manager

    manager = get_cache_manager(KEY)
    assert Path(manager.cache_dir).parent == folder
    kernel = manager.put(b"\x7fELF compiled", "kernel.cubin")
    manager.put_group("kernel.json", {"kernel.cubin": kernel})
    manager.put(json.dumps({"configs_timings": []}), "kernel.autotune.json", binary=False)
    return {"kernel": kernel}


def test_one_folder_per_version_and_machine_written_by_the_orchestrator(tmp_path: Path, clean_env: None) -> None:
    folder = reference_cache.activate("2026.1", tmp_path)
    assert folder == tmp_path / "2026.1" / reference_cache.machine_key()
    assert "triton" in folder.name and "torch" in folder.name
    assert os.environ["TRITON_CACHE_DIR"] == str(folder) and os.environ["TRITON_CACHE_AUTOTUNING"] == "1"
    assert folder.stat().st_mode & 0o077 == 0  # no worker uid can read the reference's compiled code
    written = _fill(folder)
    assert Path(written["kernel"]).read_bytes() == b"\x7fELF compiled"
    assert reference_cache.size(folder)[0] >= 3
    assert reference_cache.location("2026.2", tmp_path) != folder  # a new version starts afresh


def test_switched_off(tmp_path: Path, clean_env: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(reference_cache.ENV, "off")
    assert reference_cache.activate("2026.1") is None
    assert "TRITON_CACHE_DIR" not in os.environ


CHILD = """
import json, os, sys
from pathlib import Path
from grader.engine.judge import reference_cache
folder = reference_cache.activate("2026.1", Path(sys.argv[1]))
from triton.runtime.cache import get_cache_manager
manager = get_cache_manager(sys.argv[2])
print(json.dumps({
    "folder": str(folder),
    "manager": type(manager).__name__,
    "kernel": manager.get_file("kernel.cubin"),
    "group": manager.get_group("kernel.json"),
    "missing": manager.get_file("other.cubin"),
    "written": manager.put(b"compiled here", "other.cubin"),
}))
"""


def test_a_cache_it_cannot_write_is_read_and_left_alone(tmp_path: Path, clean_env: None) -> None:
    """Mounted read-only into a grading (a container's mount of the node's cache): read, never written."""
    folder = reference_cache.activate("2026.1", tmp_path)
    assert folder is not None
    _fill(folder)
    before = sorted(str(p) for p in folder.rglob("*"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRITON_")}
    env["PYTHONPATH"] = str(ROOT)
    child = [sys.executable, "-c", CHILD, str(tmp_path), KEY]
    if os.geteuid() == 0:  # root writes anywhere but on a read-only mount: make one, as a container would
        if shutil.which("unshare") is None:
            pytest.skip("no unshare(1) to make a read-only mount with")
        script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
        child = ["unshare", "-m", "sh", "-c", script, "sh", str(tmp_path), *child]
    else:
        for path in [tmp_path, *tmp_path.rglob("*")]:
            if path.is_dir():
                path.chmod(0o555)
    done = subprocess.run(child, env=env, capture_output=True, text=True, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["folder"] == str(folder) and seen["manager"] == "OverlayCache"
    assert seen["kernel"] and Path(seen["kernel"]).is_relative_to(folder)
    assert set(seen["group"]) == {"kernel.cubin"} and Path(seen["group"]["kernel.cubin"]).is_relative_to(folder)
    assert seen["missing"] is None
    assert not Path(seen["written"]).is_relative_to(tmp_path)  # a miss is compiled into the process's own folder
    assert sorted(str(p) for p in folder.rglob("*")) == before
