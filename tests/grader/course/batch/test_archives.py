"""Unpacking student archives: what is refused, what is capped, where things land."""

from __future__ import annotations

import gzip
import io
import stat
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from grader.course.batch.archive_limits import ArchiveError, Limits
from grader.course.batch.archives import archive_suffix, find_submission_root, strip_archive_suffix, unpack
from grader.engine.assignment.load import load_assignment

MODULES = [p.module for p in load_assignment(hidden=False).problems]


def make_zip(path: Path, files: dict[str, bytes], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def make_tar(
    path: Path, files: dict[str, bytes], symlinks: dict[str, str] | None = None, hardlinks: dict[str, str] | None = None
) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
        for name, target in (symlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
        for name, target in (hardlinks or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.LNKTYPE
            info.linkname = target
            tf.addfile(info)
    return path


def outside_files(tmp_path: Path, dest: Path) -> set[Path]:
    return {p for p in tmp_path.rglob("*") if dest not in p.parents and p != dest}


def test_plain_zip_unpacks(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "alice.zip", {"gelu.py": b"x = 1\n", "sub/softmax.py": b"y = 2\n"})
    dest = unpack(archive, tmp_path / "out")
    assert (dest / "gelu.py").read_bytes() == b"x = 1\n"
    assert (dest / "sub" / "softmax.py").read_bytes() == b"y = 2\n"


def test_plain_tar_gz_unpacks(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "bob.tar.gz", {"bob/gelu.py": b"print('hi')\n"})
    dest = unpack(archive, tmp_path / "out")
    assert (dest / "bob" / "gelu.py").read_text() == "print('hi')\n"
    assert stat.S_IMODE((dest / "bob" / "gelu.py").stat().st_mode) == 0o644


@pytest.mark.parametrize("name", ["../evil.py", "a/../../evil.py", "..\\evil.py", "/tmp/evil.py", "C:/evil.py"])
def test_zip_slip_is_refused_and_nothing_is_written(tmp_path: Path, name: str) -> None:
    archive = make_zip(tmp_path / "slip.zip", {"gelu.py": b"ok\n", name: b"pwned\n"})
    before = outside_files(tmp_path, tmp_path / "out")
    with pytest.raises(ArchiveError, match=r"\.\.|absolute"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert outside_files(tmp_path, tmp_path / "out") == before
    assert not Path("/tmp/evil.py").exists()


def test_tar_with_absolute_path_is_refused(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "abs.tar.gz", {"/etc/evil.conf": b"x"})
    with pytest.raises(ArchiveError, match="absolute path"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_tar_dotdot_is_refused(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "dots.tar.gz", {"gelu.py": b"x", "../../evil.py": b"x"})
    with pytest.raises(ArchiveError, match=r"'\.\.'"):
        unpack(archive, tmp_path / "out")
    assert not (tmp_path.parent / "evil.py").exists()


def test_tar_symlink_is_refused(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "link.tar.gz", {"gelu.py": b"x"}, symlinks={"secrets": "/etc"})
    with pytest.raises(ArchiveError, match="symbolic link"):
        unpack(archive, tmp_path / "out")


def test_tar_symlink_then_write_through_it_is_refused(tmp_path: Path) -> None:
    """The classic two-step escape: a link to a folder outside, then a file 'inside' the link."""
    archive = make_tar(tmp_path / "escape.tar.gz", {"esc/evil.py": b"x"}, symlinks={"esc": str(tmp_path / "victim")})
    (tmp_path / "victim").mkdir()
    with pytest.raises(ArchiveError):
        unpack(archive, tmp_path / "out")
    assert list((tmp_path / "victim").iterdir()) == []


def test_tar_hardlink_is_refused(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "hard.tar.gz", {"gelu.py": b"x"}, hardlinks={"passwd": "/etc/passwd"})
    with pytest.raises(ArchiveError, match="hard link"):
        unpack(archive, tmp_path / "out")


def test_zip_symlink_is_refused(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "link.zip", {"gelu.py": b"x"}, links={"shadow": "/etc/shadow"})
    with pytest.raises(ArchiveError, match="symbolic link"):
        unpack(archive, tmp_path / "out")


def test_tar_device_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dev.tar"
    with tarfile.open(path, "w") as tf:
        info = tarfile.TarInfo("null")
        info.type = tarfile.CHRTYPE
        info.devmajor, info.devminor = 1, 3
        tf.addfile(info)
    with pytest.raises(ArchiveError, match="not a regular file"):
        unpack(path, tmp_path / "out")


def test_total_size_cap(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "big.zip", {f"f{i}.py": b"0" * 4000 for i in range(5)})
    with pytest.raises(ArchiveError, match="bytes uncompressed in all"):
        unpack(archive, tmp_path / "out", Limits(max_total_bytes=10_000))
    assert not (tmp_path / "out").exists()


def test_zip_bomb_is_refused_before_inflating(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("gelu.py", b"\0" * (20 << 20))
    assert path.stat().st_size < 100_000
    with pytest.raises(ArchiveError, match="times its own size"):
        unpack(path, tmp_path / "out")
    with pytest.raises(ArchiveError, match="per file"):
        unpack(path, tmp_path / "out", Limits(max_ratio=1e9))


def test_tar_bomb_stops_at_the_inflation_bound(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "bomb.tar.gz", {"gelu.py": b"\0" * (20 << 20)})
    assert archive.stat().st_size < 100_000
    with pytest.raises(ArchiveError, match="inflates to more than"):
        unpack(archive, tmp_path / "out", Limits(max_file_bytes=64 << 20))
    assert not (tmp_path / "out").exists()


def folder_headers(path: Path, count: int, name: bytes = b"d/") -> Path:
    """A .tar.gz of `count` headers of one folder (issue 17: 600 000 of them in 1.3 MiB)."""
    info = tarfile.TarInfo(name.decode())
    info.type = tarfile.DIRTYPE
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    with gzip.open(path, "wb", compresslevel=1) as out:
        for _ in range(0, count, 1000):
            out.write(header * 1000)
        out.write(b"\0" * 1024)
    return path


def test_folders_count_as_entries(tmp_path: Path) -> None:
    archive = folder_headers(tmp_path / "dirs.tar.gz", 5000)
    with pytest.raises(ArchiveError, match="more than 2000 entries"):
        unpack(archive, tmp_path / "out")
    zipped = make_zip(tmp_path / "dirs.zip", {f"d{i}/": b"" for i in range(2001)})
    with pytest.raises(ArchiveError, match="at most 2000"):
        unpack(zipped, tmp_path / "out")


def test_unpacking_is_bounded_in_time(tmp_path: Path) -> None:
    archive = folder_headers(tmp_path / "dirs.tar.gz", 300_000)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="took more than 1 s"):
        unpack(archive, tmp_path / "out", Limits(max_entries=10**7, max_ratio=1e9, max_seconds=1.0))
    assert time.monotonic() - started < 5


def test_a_member_name_that_is_not_utf8_is_kept_escaped(tmp_path: Path) -> None:
    archive = tmp_path / "names.tar.gz"
    with tarfile.open(archive, "w:gz", encoding="utf-8", errors="surrogateescape") as tf:
        for name in ("gelu.py", "notes_\udcff.txt"):  # the bytes notes_\xff.txt, as tarfile reads them
            info = tarfile.TarInfo(name)
            info.size = 2
            tf.addfile(info, io.BytesIO(b"x\n"))
    dest = unpack(archive, tmp_path / "out")
    assert sorted(p.name for p in dest.iterdir()) == ["gelu.py", "notes_%FF.txt"]
    latin1 = tmp_path / "Jos\udce9.tar.gz"  # an archive's own name in Latin-1 (old Windows zip tools)
    archive.rename(latin1)
    assert (unpack(latin1, tmp_path / "out2") / "gelu.py").is_file()


def test_tar_size_cap_on_declared_sizes(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "big.tar.gz", {"a.py": b"0" * 6000, "b.py": b"0" * 6000})
    with pytest.raises(ArchiveError, match="in all"):
        unpack(archive, tmp_path / "out", Limits(max_total_bytes=10_000))


def test_file_count_cap(tmp_path: Path) -> None:
    archive = make_tar(tmp_path / "many.tar.gz", {f"f{i}.py": b"x" for i in range(30)})
    with pytest.raises(ArchiveError, match="more than 20 files"):
        unpack(archive, tmp_path / "out", Limits(max_files=20))


def test_depth_cap(tmp_path: Path) -> None:
    deep = "/".join(["d"] * 12) + "/gelu.py"
    archive = make_zip(tmp_path / "deep.zip", {deep: b"x"})
    with pytest.raises(ArchiveError, match="levels deep"):
        unpack(archive, tmp_path / "out", Limits(max_depth=8))


def test_archive_file_size_cap(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "a.zip", {"gelu.py": b"x" * 5000})
    with pytest.raises(ArchiveError, match="more than the"):
        unpack(archive, tmp_path / "out", Limits(max_archive_bytes=1000))


def test_duplicate_member_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("gelu.py", b"one")
        with pytest.warns(UserWarning):
            zf.writestr("gelu.py", b"two")
    with pytest.raises(ArchiveError, match="twice"):
        unpack(path, tmp_path / "out")


def test_corrupt_archive_is_an_archive_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.zip"
    path.write_bytes(b"PK\x03\x04 this is not a zip")
    with pytest.raises(ArchiveError, match="cannot be read"):
        unpack(path, tmp_path / "out")
    path = tmp_path / "junk.tar.gz"
    path.write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(ArchiveError, match="cannot be read"):
        unpack(path, tmp_path / "out")


def test_encrypted_zip_member_is_refused(tmp_path: Path) -> None:
    path = make_zip(tmp_path / "enc.zip", {"gelu.py": b"x"})
    data = bytearray(path.read_bytes())
    # set the 'encrypted' flag bit in both the local header and the central directory entry
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.find(sig)
        flag_at = at + (6 if sig == b"PK\x03\x04" else 8)
        data[flag_at] |= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="encrypted"):
        unpack(path, tmp_path / "out")


def test_macos_junk_is_skipped(tmp_path: Path) -> None:
    archive = make_zip(
        tmp_path / "mac.zip", {"alice/gelu.py": b"x", "__MACOSX/alice/._gelu.py": b"junk", "alice/._gelu.py": b"junk"}
    )
    dest = unpack(archive, tmp_path / "out")
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*")) == ["alice", "alice/gelu.py"]


def test_nested_submission_is_found(tmp_path: Path) -> None:
    archive = make_zip(
        tmp_path / "alice.zip", {"alice/gelu.py": b"x", "alice/softmax.py": b"x", "alice/notes/readme.txt": b"x"}
    )
    dest = unpack(archive, tmp_path / "out")
    assert find_submission_root(dest, MODULES) == dest / "alice"


def test_submission_root_prefers_the_top_and_the_most_modules(tmp_path: Path) -> None:
    (tmp_path / "top").mkdir()
    (tmp_path / "top" / "gelu.py").write_text("x")
    (tmp_path / "top" / "old").mkdir()
    (tmp_path / "top" / "old" / "gelu.py").write_text("x")
    assert find_submission_root(tmp_path / "top", MODULES) == tmp_path / "top"
    (tmp_path / "two" / "a" / "b").mkdir(parents=True)
    for name in ("gelu.py", "softmax.py"):
        (tmp_path / "two" / "a" / "b" / name).write_text("x")
    assert find_submission_root(tmp_path / "two", MODULES) == tmp_path / "two" / "a" / "b"
    (tmp_path / "none").mkdir()
    assert find_submission_root(tmp_path / "none", MODULES) == tmp_path / "none"


def test_suffixes() -> None:
    assert archive_suffix(Path("a.ZIP")) == ".zip"
    assert archive_suffix(Path("a.tar.gz")) == ".tar.gz"
    assert archive_suffix(Path("a.tgz")) == ".tgz"
    assert archive_suffix(Path("a.py")) is None
    assert strip_archive_suffix("alice.tar.gz") == "alice"
    assert strip_archive_suffix("bob.zip") == "bob"
