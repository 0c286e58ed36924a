"""Per-submission Triton caches: copied without following links, capped, and only ever returned
to a worker of the same submission."""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader import kernel_cache
from grader.cli import main


def test_copy_takes_regular_files_and_never_follows_links(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hidden cases")
    src = tmp_path / "cache"
    (src / "abc").mkdir(parents=True)
    (src / "abc" / "kernel.cubin").write_bytes(b"\x7fELF" + b"0" * 100)
    (src / "abc" / "__grp__kernel.json").write_text("{}")
    (src / "abc" / "leak").symlink_to(secret)
    (src / "outside").symlink_to(tmp_path)
    os.mkfifo(src / "abc" / "pipe")
    copied = kernel_cache.copy_tree(src, tmp_path / "copy")
    assert copied.files == 2 and not copied.truncated
    got = sorted(str(p.relative_to(tmp_path / "copy")) for p in (tmp_path / "copy").rglob("*"))
    assert got == ["abc", "abc/__grp__kernel.json", "abc/kernel.cubin"]


def test_a_source_that_is_itself_a_link_copies_nothing(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert kernel_cache.save(tmp_path / "link", tmp_path / "kept").files == 0
    assert not (tmp_path / "kept").exists()


def test_copies_stop_at_the_caps(tmp_path: Path) -> None:
    src = tmp_path / "cache"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(b"x" * 1000)
    assert kernel_cache.copy_tree(src, tmp_path / "a", max_files=3).files == 3
    capped = kernel_cache.copy_tree(src, tmp_path / "b", max_bytes=2500)
    assert capped.files == 2 and capped.bytes == 2000 and capped.truncated


def test_save_replaces_the_kept_copy(tmp_path: Path) -> None:
    src, kept = tmp_path / "cache", tmp_path / "kept" / "sha" / "gelu"
    src.mkdir()
    (src / "one").write_text("1")
    kernel_cache.save(src, kept)
    (src / "one").unlink()
    (src / "two").write_text("2")
    kernel_cache.save(src, kept)
    assert sorted(p.name for p in kept.iterdir()) == ["two"]
    assert [p.name for p in kept.parent.iterdir()] == ["gelu"]  # no temporary folders left


# A submission that reports whether its Triton cache already holds a file, then writes one there.
PROBE = '''
import json, os
from pathlib import Path
cache = Path(os.environ["TRITON_CACHE_DIR"])
marker = cache / "probe" / "compiled.bin"
print(json.dumps({"cached": marker.exists(), "content": marker.read_text() if marker.exists() else None}), flush=True)
marker.parent.mkdir(parents=True, exist_ok=True)
marker.write_text(%r)
(cache / "probe" / "escape").unlink(missing_ok=True)
(cache / "probe" / "escape").symlink_to("/etc/passwd")
'''


def _graded(folder: Path, out: Path, *extra: str) -> dict:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "gelu", *extra]) == 0
    result = json.loads((out / "result.json").read_text())
    (gelu,) = result["problems"]
    line = next(x for x in gelu["output"].splitlines() if x.startswith('{"cached"'))
    return json.loads(line)


def test_a_second_grading_of_the_same_code_finds_its_kernels(make_submission, tmp_path: Path) -> None:
    gelu = (Path(__file__).resolve().parents[2] / "examples" / "submissions" / "correct" / "gelu.py").read_text()
    cache = tmp_path / "kernels"
    first = make_submission(gelu=gelu + PROBE % "from A")
    assert _graded(first, tmp_path / "a1", "--kernel-cache", str(cache)) == {"cached": False, "content": None}
    assert _graded(first, tmp_path / "a2", "--kernel-cache", str(cache)) == {"cached": True, "content": "from A"}
    kept = list(cache.rglob("*"))
    assert not any(p.is_symlink() for p in kept) and not any(p.name == "escape" for p in kept)
    # different code never sees another submission's cache
    other = make_submission(gelu=gelu + PROBE % "from B")
    assert _graded(other, tmp_path / "b1", "--kernel-cache", str(cache)) == {"cached": False, "content": None}
    # and --no-kernel-cache keeps nothing and seeds nothing
    assert _graded(first, tmp_path / "a3", "--no-kernel-cache") == {"cached": False, "content": None}


# A submission that stores a compiled-kernel group the way Triton does (its files by absolute
# path, in this worker's cache directory) and reports whether Triton's own lookup finds it.
GROUP_PROBE = '''
import json
from triton.runtime.cache import FileCacheManager
manager = FileCacheManager("probekey")
group = manager.get_group("kernel.json")
print(json.dumps({"group_found": group is not None}), flush=True)
if group is None:
    binary = manager.put(b"cubin bytes", "kernel.cubin")
    meta = manager.put("{}", "kernel.json", binary=False)
    manager.put_group("kernel.json", {"kernel.cubin": binary, "kernel.json": meta})
'''


def test_compiled_kernels_are_found_from_another_workers_cache_directory(make_submission, tmp_path: Path) -> None:
    """Triton's group files name their files by absolute path; a restored cache must point them home."""
    gelu = (Path(__file__).resolve().parents[2] / "examples" / "submissions" / "correct" / "gelu.py").read_text()
    folder = make_submission(gelu=gelu + GROUP_PROBE)
    cache = tmp_path / "kernels"

    def found(out: str) -> bool:
        assert main(["grade", str(folder), "--out", str(tmp_path / out), "--problems", "gelu", "--kernel-cache", str(cache)]) == 0
        (gelu_result,) = json.loads((tmp_path / out / "result.json").read_text())["problems"]
        line = next(x for x in gelu_result["output"].splitlines() if x.startswith('{"group_found"'))
        return json.loads(line)["group_found"]

    assert found("first") is False
    assert found("second") is True


def test_rehome_group_points_paths_into_the_new_cache(tmp_path: Path) -> None:
    group = tmp_path / "new" / "KEY" / "__grp__k.json"
    group.parent.mkdir(parents=True)
    group.write_text(json.dumps({"child_paths": {"k.cubin": "/old/worker/.triton/KEY/k.cubin"}}))
    kernel_cache.rehome_group(group, tmp_path / "new")
    assert json.loads(group.read_text()) == {"child_paths": {"k.cubin": str(tmp_path / "new" / "KEY" / "k.cubin")}}
    for bad in ("not json", json.dumps({"child_paths": ["x"]}), json.dumps({"child_paths": {"k": "/x/../.."}})):
        group.write_text(bad)
        kernel_cache.rehome_group(group, tmp_path / "new")  # left as it was, no error
        assert group.read_text() == bad
