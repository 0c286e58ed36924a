"""Per-submission Triton caches: copied without following links, capped, and only ever returned
to a worker of the same submission."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from grader.cli import main
from grader.engine import kernel_cache
from grader.engine.sandbox import processes
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.process import WorkerProcess


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


def test_seed_copies_stop_at_the_caps(tmp_path: Path) -> None:
    src = tmp_path / "cache"
    src.mkdir()
    for i in range(5):
        (src / f"f{i}").write_bytes(b"x" * 1000)
    assert kernel_cache.copy_tree(src, tmp_path / "a", max_files=3).files == 3
    capped = kernel_cache.copy_tree(src, tmp_path / "b", max_bytes=2500)
    assert capped.files == 2 and capped.bytes == 2000 and capped.truncated


def tar_stream(entries: dict[str, bytes | str | None]) -> io.BytesIO:
    """A real tar stream of a `.triton` folder: bytes are files, a str a symbolic link, None a FIFO."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        for name, body in entries.items():
            info = tarfile.TarInfo(f".triton/{name}")
            if isinstance(body, bytes):
                info.size = len(body)
                archive.addfile(info, io.BytesIO(body))
            else:
                info.type = tarfile.SYMTYPE if isinstance(body, str) else tarfile.FIFOTYPE
                info.linkname = body or ""
                archive.addfile(info)
    raw.seek(0)
    return raw


def kept_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir())


def test_only_what_triton_writes_is_kept(tmp_path: Path) -> None:
    """Issue 17: 501 MiB of junk per problem were kept; now only Triton's own kinds of file."""
    stream = tar_stream(
        {
            "KEY/gelu_kernel.cubin": b"\x7fELF",
            "KEY/gelu_kernel.ttir": b"module {}",
            "KEY/gelu_kernel.json": b"{}",
            "KEY/__grp__gelu_kernel.json": b"{}",
            "AUTOTUNE/gelu_kernel.autotune.json": b"{}",
            "LAUNCH/__triton_launcher.cpython-311-x86_64-linux-gnu.so": b"\x7fELF",
            "junk.bin": b"x" * 4096,  # not in a key folder
            "KEY/notes.txt": b"not a Triton kind",
            "KEY/tmp.pid_1_2/gelu_kernel.cubin": b"a temporary folder",
            "KEY/deep/er/x.json": b"{}",
            "KEY/leak.json": "/etc/shadow",  # a link: never created
            "KEY/pipe.json": None,  # a FIFO: never created
        }
    )
    copied = kernel_cache.receive(stream, tmp_path / "kept")
    assert kept_files(tmp_path / "kept") == [
        "AUTOTUNE/gelu_kernel.autotune.json",
        "KEY/__grp__gelu_kernel.json",
        "KEY/gelu_kernel.cubin",
        "KEY/gelu_kernel.json",
        "KEY/gelu_kernel.ttir",
        "LAUNCH/__triton_launcher.cpython-311-x86_64-linux-gnu.so",
    ]
    assert copied.files == 6 and not copied.truncated
    assert not any(p.is_symlink() for p in (tmp_path / "kept").rglob("*"))


def test_a_slot_stops_at_its_caps_and_a_broken_stream_keeps_whole_files(tmp_path: Path) -> None:
    files = {f"KEY/k{i}.cubin": b"x" * 1000 for i in range(5)}
    capped = kernel_cache.receive(tar_stream(files), tmp_path / "a", max_bytes=2500)
    assert capped.files == 2 and capped.bytes == 2000 and capped.truncated
    assert kernel_cache.receive(tar_stream(files), tmp_path / "b", max_files=3).files == 3
    cut = io.BytesIO(tar_stream(files).getvalue()[: 512 * 4 + 700])  # ends inside the third file
    broken = kernel_cache.receive(cut, tmp_path / "c")
    assert broken.truncated and kept_files(tmp_path / "c") == ["KEY/k0.cubin", "KEY/k1.cubin"]
    assert kernel_cache.receive(io.BytesIO(b"not a tar stream" * 100), tmp_path / "d").files == 0


def test_reading_a_flooded_cache_stops_at_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries of any kind count, kept or not: past MAX_MEMBERS the copy stops and says so (issue 29)."""
    monkeypatch.setattr(kernel_cache, "MAX_MEMBERS", 50)
    flood = {f"KEY/f{i}.json": b"" for i in range(200)}
    copied = kernel_cache.receive(tar_stream(flood), tmp_path / "flood")
    assert copied.truncated and copied.files == 50 and "stopped after 50 entries" in copied.stopped
    honest = kernel_cache.receive(tar_stream({f"KEY/f{i}.json": b"{}" for i in range(40)}), tmp_path / "honest")
    assert honest.files == 40 and not honest.truncated and not honest.stopped


def test_keep_replaces_the_slot_atomically(tmp_path: Path) -> None:
    kept = tmp_path / "kept" / "sha" / "gelu"
    kernel_cache.keep(lambda folder: kernel_cache.receive(tar_stream({"K/one.cubin": b"1"}), folder), kept)
    kernel_cache.keep(lambda folder: kernel_cache.receive(tar_stream({"K/two.cubin": b"2"}), folder), kept)
    assert kept_files(kept) == ["K/two.cubin"]
    assert [p.name for p in kept.parent.iterdir()] == ["gelu"]  # no temporary folders left
    kernel_cache.keep(lambda folder: kernel_cache.receive(tar_stream({"junk": b"x"}), folder), kept)
    assert kept_files(kept) == ["K/two.cubin"], "a cache with nothing of Triton's does not replace one"


def _slot(root: Path, sha: str, problem: str, size: int, age_s: float) -> Path:
    folder = kernel_cache.slot(root, sha, problem)
    (folder / "KEY").mkdir(parents=True)
    (folder / "KEY" / "k.cubin").write_bytes(b"x" * size)
    when = time.time() - age_s
    os.utime(folder, (when, when))
    return folder


def test_eviction_removes_the_least_recently_used_first(tmp_path: Path) -> None:
    root = tmp_path / "kernels"
    old = _slot(root, "a" * 64, "gelu", 3000, age_s=3000)
    middle = _slot(root, "b" * 64, "gelu", 3000, age_s=2000)
    new = _slot(root, "b" * 64, "softmax", 3000, age_s=1000)
    kernel_cache.touch(old)  # seeded a worker just now: the most recently used
    removed = kernel_cache.evict(root, max_total=6500)
    assert [k.path for k in removed] == [middle]
    assert old.is_dir() and new.is_dir() and not middle.exists()
    assert [k.path for k in kernel_cache.evict(root, max_total=0, older_than_s=None)] == [new, old]
    assert list(root.iterdir()) == [root / ".lock"], "empty submission folders go too"


def test_staff_list_and_prune_the_cache(tmp_path: Path, capsys) -> None:
    root = tmp_path / "kernels"
    _slot(root, "a" * 64, "gelu", 2 << 20, age_s=10 * 86400)
    _slot(root, "b" * 64, "matmul", 1 << 20, age_s=60)
    assert main(["kernel-cache", "list", "--kernel-cache", str(root)]) == 0
    listing = capsys.readouterr().out
    assert listing.index("a" * 32 + "/gelu") < listing.index("b" * 32 + "/matmul"), "least recently used first"
    assert "2 slot(s), 3.0 MiB" in listing
    assert main(["kernel-cache", "prune", "--kernel-cache", str(root), "--older-than", "7"]) == 0
    assert "removed 1 slot(s), 2.0 MiB" in capsys.readouterr().out
    assert main(["kernel-cache", "prune", "--kernel-cache", str(root), "--max-bytes", "2M"]) == 0
    assert "removed 0 slot(s)" in capsys.readouterr().out
    assert main(["kernel-cache", "prune", "--kernel-cache", str(root), "--all"]) == 0
    assert kernel_cache.slots(root) == []
    assert kernel_cache.parse_size("8G") == 8 << 30 and kernel_cache.parse_size("512MiB") == 512 << 20


# The attack of issue 17, with the mounts made from outside (the worker itself may not mount any
# more): one folder of the worker's cache is a bind mount of a root-only folder, another of a
# world-readable host folder the namespace had hidden. Neither may end up in the kept cache.
MOUNT_PROBE = """
import os
cache = os.environ["TRITON_CACHE_DIR"]
for key in ("KEY", "ROOTONLY", "HOSTDIR"):
    os.makedirs(os.path.join(cache, key), exist_ok=True)
open(os.path.join(cache, "KEY", "mine.cubin"), "w").write("compiled")

def triton_gelu(x):
    return x
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the namespace level and the bind mounts need root")
def test_the_cache_is_never_read_through_a_mount(tmp_path: Path) -> None:
    # outside /tmp, which the worker's namespace replaces with its own: both folders are in its view
    outside = Path(tempfile.mkdtemp(prefix="grader-cache-test-", dir="/run"))
    try:
        os.chmod(outside, 0o755)
        root_only, host_dir = outside / "root-only", outside / "host"
        root_only.mkdir(mode=0o700)
        (root_only / "leak.json").write_text("ROOT-ONLY")
        os.chmod(root_only / "leak.json", 0o600)
        host_dir.mkdir(mode=0o755)
        (host_dir / "leak.json").write_text("HOST-FILE")
        submission = tmp_path / "sub"
        submission.mkdir()
        (submission / "gelu.py").write_text(MOUNT_PROBE)
        worker = WorkerProcess(SandboxConfig(device="cpu"), submission, "gelu", "gelu", "triton_gelu")
        try:
            assert worker.wait_ready(time.monotonic() + 60).status == "ready", worker.output()
            assert worker.plan.level == "namespace"
            cache = worker.scratch / "home" / ".triton"
            for source, key in ((root_only, "ROOTONLY"), (host_dir, "HOSTDIR")):
                subprocess.run(
                    ["nsenter", "-t", str(worker.proc.pid), "-m", "mount", "--bind", str(source), str(cache / key)],
                    check=True,
                )
        finally:
            held = worker.close(keep_cache=True)  # the worker ends; its namespace is held for the copy
        assert held is not None and worker.proc.poll() is not None
        assert not processes.worker_processes(worker.plan, worker.token, None)  # every process of it ended
        assert worker.scratch.is_dir()  # removed only once the copy is made
        kept = held.copy(tmp_path / "kernels" / ("a" * 32) / "gelu")
        assert not worker.scratch.exists() and held.ns_fd == -1
    finally:
        shutil.rmtree(outside)
    assert kept is not None and kept.files == 1
    assert kept_files(tmp_path / "kernels" / ("a" * 32) / "gelu") == ["KEY/mine.cubin"]


# A submission that reports whether its Triton cache already holds a file, then writes one there.
PROBE = """
import json, os
from pathlib import Path
cache = Path(os.environ["TRITON_CACHE_DIR"])
marker = cache / "probe" / "kernel.cubin"
print(json.dumps({"cached": marker.exists(), "content": marker.read_text() if marker.exists() else None}), flush=True)
marker.parent.mkdir(parents=True, exist_ok=True)
marker.write_text(%r)
(cache / "probe" / "junk.bin").write_bytes(b"x" * (1 << 20))  # not a kind Triton writes: not kept
(cache / "probe" / "escape").unlink(missing_ok=True)
(cache / "probe" / "escape").symlink_to("/etc/passwd")
"""


def _graded(folder: Path, out: Path, *extra: str) -> dict:
    assert main(["grade", str(folder), "--out", str(out), "--problems", "gelu", *extra]) == 0
    result = json.loads((out / "result.json").read_text())
    (gelu,) = result["problems"]
    line = next(x for x in gelu["output"].splitlines() if x.startswith('{"cached"'))
    return json.loads(line)


def test_a_second_grading_of_the_same_code_finds_its_kernels(make_submission, tmp_path: Path) -> None:
    gelu = (Path(__file__).resolve().parents[3] / "examples" / "submissions" / "correct" / "gelu.py").read_text()
    cache = tmp_path / "kernels"
    first = make_submission(gelu=gelu + PROBE % "from A")
    assert _graded(first, tmp_path / "a1", "--kernel-cache", str(cache)) == {"cached": False, "content": None}
    assert _graded(first, tmp_path / "a2", "--kernel-cache", str(cache)) == {"cached": True, "content": "from A"}
    kept = list(cache.rglob("*"))
    assert not any(p.is_symlink() for p in kept) and not any(p.name in ("escape", "junk.bin") for p in kept)
    # different code never sees another submission's cache
    other = make_submission(gelu=gelu + PROBE % "from B")
    assert _graded(other, tmp_path / "b1", "--kernel-cache", str(cache)) == {"cached": False, "content": None}
    # and --no-kernel-cache keeps nothing and seeds nothing
    assert _graded(first, tmp_path / "a3", "--no-kernel-cache") == {"cached": False, "content": None}


# A submission that stores a compiled-kernel group the way Triton does (its files by absolute
# path, in this worker's cache directory) and reports whether Triton's own lookup finds it.
GROUP_PROBE = """
import json
from triton.runtime.cache import FileCacheManager
manager = FileCacheManager("probekey")
group = manager.get_group("kernel.json")
print(json.dumps({"group_found": group is not None}), flush=True)
if group is None:
    binary = manager.put(b"cubin bytes", "kernel.cubin")
    meta = manager.put("{}", "kernel.json", binary=False)
    manager.put_group("kernel.json", {"kernel.cubin": binary, "kernel.json": meta})
"""


def test_compiled_kernels_are_found_from_another_workers_cache_directory(make_submission, tmp_path: Path) -> None:
    """Triton's group files name their files by absolute path; a restored cache must point them home."""
    gelu = (Path(__file__).resolve().parents[3] / "examples" / "submissions" / "correct" / "gelu.py").read_text()
    folder = make_submission(gelu=gelu + GROUP_PROBE)
    cache = tmp_path / "kernels"

    def found(out: str) -> bool:
        assert (
            main(
                ["grade", str(folder), "--out", str(tmp_path / out), "--problems", "gelu", "--kernel-cache", str(cache)]
            )
            == 0
        )
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
