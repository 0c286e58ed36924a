"""The reference cache as one archive: packed on one machine, unpacked on a fresh one, refused elsewhere."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from grader.engine.judge import reference_archive, reference_cache
from grader.engine.judge.reference_archive import ArchiveError


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(reference_cache.ENV, str(root))
    return root


def fill(version: str) -> Path:
    folder = reference_cache.location(version)
    assert folder is not None
    (folder / "abc").mkdir(parents=True)
    (folder / "abc" / "kernel.cubin").write_bytes(b"\x7fELF compiled")
    (folder / "abc" / "kernel.autotune.json").write_text('{"best": 3}')
    return folder


def test_a_fresh_machine_gets_the_same_files(cache_root: Path, tmp_path: Path) -> None:
    folder = fill("v1")
    archive = tmp_path / "ref.tar.gz"
    files, _ = reference_archive.pack("v1", archive)
    assert files == 2
    shutil_rm(cache_root)  # a fresh machine: nothing cached
    got, added = reference_archive.unpack(archive, "v1")
    assert got == folder and added == 2
    assert (folder / "abc" / "kernel.autotune.json").read_text() == '{"best": 3}'
    assert reference_archive.unpack(archive, "v1")[1] == 0  # what is there is kept


def test_another_version_or_machine_is_refused_with_a_reason(cache_root: Path, tmp_path: Path) -> None:
    fill("v1")
    archive = tmp_path / "ref.tar.gz"
    reference_archive.pack("v1", archive)
    with pytest.raises(ArchiveError, match="built for version v1 .* this grading is version v2"):
        reference_archive.unpack(archive, "v2")


def test_not_an_archive_is_a_clear_error(cache_root: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tar")
    with pytest.raises(ArchiveError, match="cannot unpack"):
        reference_archive.unpack(junk, "v1")
    with pytest.raises(ArchiveError, match="cannot read"):
        reference_archive.unpack(tmp_path / "missing.tar.gz", "v1")


def test_members_that_escape_or_are_links_are_never_written(cache_root: Path, tmp_path: Path) -> None:
    archive = tmp_path / "evil.tar.gz"
    manifest = json.dumps({"version": "v1", "machine": reference_cache.machine_key()}).encode()
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in ((reference_archive.MANIFEST, manifest), ("cache/../../escaped", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("cache/link")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    with pytest.raises(ArchiveError):
        reference_archive.unpack(archive, "v1")
    assert not (tmp_path / "escaped").exists() and not (cache_root / "escaped").exists()


def shutil_rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path)
