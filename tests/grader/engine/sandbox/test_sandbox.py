"""The worker sandbox, tested with real worker processes: isolation, limits, the sweep, the protocol.

Each test starts a worker on a tiny submission whose import does the probing and prints what it
found as JSON lines; the test reads the worker's captured output after closing it. Tests of the
namespace and of the transient user need the grader to run as root (they skip otherwise).
"""

from __future__ import annotations

import errno
import json
import os
import pickle
import time
from pathlib import Path

import pytest

from grader.engine import protocol
from grader.engine.sandbox import seccomp
from grader.engine.sandbox.config import SandboxConfig
from grader.engine.sandbox.output import CapturedStream
from grader.engine.sandbox.plan import GRADER_ROOT, blocked_ancestor, plan_isolation, runtime_paths
from grader.engine.sandbox.process import WorkerDied, WorkerProcess, WorkerTimeout, WorkerUnavailable
from grader.engine.sandbox.processes import process_ids, run_state
from grader.engine.sandbox.uids import TRANSIENT_UIDS, lease_uid

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="isolation levels need the grader to run as root")
PREAMBLE = "import json, os, sys\ndef say(**kw):\n    print(json.dumps(kw), flush=True)\n"
STUB = "\ndef triton_gelu(x):\n    return x\n"


def submission(tmp_path: Path, body: str, name: str = "sub") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "gelu.py").write_text(PREAMBLE + body + STUB)
    return folder


def run_worker(
    folder: Path, config: SandboxConfig | None = None, wait_s: float = 60
) -> tuple[WorkerProcess, protocol.Message, list[dict]]:
    """Start a worker, wait for its greeting, close it; return it, the greeting and its JSON lines."""
    worker = WorkerProcess(config or SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        greeting = worker.wait_ready(time.monotonic() + wait_s)
    finally:
        worker.close()
    lines = [json.loads(line) for line in worker.stdout.text().splitlines() if line.startswith("{")]
    return worker, greeting, lines


def said(lines: list[dict]) -> dict:
    merged: dict = {}
    for line in lines:
        merged.update(line)
    return merged


# -- isolation --------------------------------------------------------------------------------------


@needs_root
def test_worker_cannot_see_the_reference_hidden_cases_results_or_secret(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "result.json").write_text('{"score": 1}')
    secret = tmp_path / "secret.txt"
    secret.write_text("SENTINEL")
    probe = f"""
def attempt(label, action):
    try:
        action()
        say(**{{label: "allowed"}})
    except OSError as exc:
        say(**{{label: type(exc).__name__}})
attempt("read_reference", lambda: open("{GRADER_ROOT}/reference/gelu.py").read())
attempt("read_hidden", lambda: open("{GRADER_ROOT}/assignment/hidden_cases.toml").read())
attempt("list_git", lambda: os.listdir("{GRADER_ROOT}/.git"))
attempt("list_results", lambda: os.listdir("{results}"))
attempt("read_result", lambda: open("{results}/result.json").read())
attempt("write_results", lambda: open("{results}/forged.json", "w").write("x"))
attempt("read_secret", lambda: open("{secret}").read())
attempt("write_etc", lambda: open("/etc/grader-was-here", "w").write("x"))
attempt("write_tmp", lambda: open("/tmp/grader-sandbox-test-marker", "w").write("x"))
attempt("write_home", lambda: open(os.environ["HOME"] + "/x", "w").write("x"))
say(uid=os.getuid(), gid=os.getgid(), groups=os.getgroups())
say(pids=sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), me=os.getpid())
say(parent_visible=os.path.exists(f"/proc/{{os.getppid()}}"), env=sorted(os.environ))
say(grader_listing=sorted(os.listdir("{GRADER_ROOT}")))
"""
    config = SandboxConfig(device="cpu", hide=[results, secret])
    worker, greeting, lines = run_worker(submission(tmp_path, probe), config)
    seen = said(lines)
    assert greeting.status == "ready", worker.output()
    assert worker.plan.level == "namespace"
    for key in (
        "read_reference",
        "read_hidden",
        "list_git",
        "list_results",
        "read_result",
        "write_results",
        "read_secret",
        "write_etc",
    ):
        assert seen[key] != "allowed", (key, seen)
    assert seen["write_tmp"] == "allowed" and seen["write_home"] == "allowed", "a private /tmp and home stay usable"
    assert not Path("/tmp/grader-sandbox-test-marker").exists(), "the worker's /tmp is its own"
    assert not Path("/etc/grader-was-here").exists()
    assert sorted(os.listdir(results)) == ["result.json"] and secret.read_text() == "SENTINEL"
    assert seen["uid"] in TRANSIENT_UIDS and seen["gid"] == seen["uid"] and seen["groups"] == []
    assert seen["pids"] == [seen["me"]] and not seen["parent_visible"], "hidepid: no other process is visible"
    assert not any("SECRET" in k for k in seen["env"])
    assert seen["grader_listing"] == sorted(
        p.name for p in [GRADER_ROOT / "grader", GRADER_ROOT / ".venv"] if p.exists()
    )


def test_the_worker_cannot_make_namespaces_or_mounts(tmp_path: Path) -> None:
    """Issue 17: a worker that made a user namespace could mount anything over its Triton cache.

    Every way in is refused, as root, as the transient user, and in the `none` level alike; the
    calls the worker's own machinery needs (threads, subprocesses) still work.
    """
    probe = """
import ctypes, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return ctypes.get_errno() if result != 0 else 0
say(unshare_user=errno_of(libc.unshare(0x10000000)))
say(unshare_mount=errno_of(libc.unshare(0x00020000)))
say(setns=errno_of(libc.setns(os.open("/proc/self/ns/mnt", os.O_RDONLY), 0)))
say(mount=errno_of(libc.mount(b"none", os.environ["HOME"].encode(), b"tmpfs", 0, None)))
say(clone3=errno_of(libc.syscall(435, 0, 0)))
say(unshare_tool=subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode)
box = []
thread = threading.Thread(target=lambda: box.append("ran"))
thread.start(); thread.join()
say(thread=box, child=subprocess.run(["true"]).returncode)
say(seccomp=[l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0])
"""
    worker, greeting, lines = run_worker(submission(tmp_path, probe))
    seen = said(lines)
    assert greeting.status == "ready", worker.output()
    for key in ("unshare_user", "unshare_mount", "setns", "mount"):
        assert seen[key] == errno.EPERM, (key, seen)
    assert seen["clone3"] == errno.ENOSYS and seen["unshare_tool"] != 0
    assert seen["thread"] == ["ran"] and seen["child"] == 0 and seen["seccomp"] == "2"
    assert worker.isolation == worker.plan.level, "with the filter, the recorded isolation is the plain level"


def test_without_the_filter_the_worker_runs_and_the_record_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An architecture without a filter here (or a kernel without seccomp) still grades, and says so."""
    monkeypatch.setattr(seccomp, "available", lambda: False)
    worker, greeting, _lines = run_worker(submission(tmp_path, ""))
    assert greeting.status == "ready", worker.output()
    assert worker.isolation.startswith(f"{worker.plan.level}, without the seccomp filter")


def test_the_filter_is_classic_bpf_for_both_architectures() -> None:
    for machine in ("x86_64", "aarch64"):
        code = seccomp.program(machine)
        assert code is not None and len(code) % 8 == 0 and len(code) // 8 < 64
    assert seccomp.program("riscv64") is None, "an unknown architecture gets no filter (and the record says so)"


@needs_root
def test_home_holding_the_triton_cache_gets_its_own_size(tmp_path: Path) -> None:
    # the reference's attention alone keeps 178 MiB of compiled kernels: the home outgrew /tmp's size
    probe = """
def size(path):
    st = os.statvfs(path)
    return st.f_blocks * st.f_frsize
say(home=size(os.environ["HOME"]), tmp=size(os.environ["TMPDIR"]), shm=size("/dev/shm"),
    cache_in_home=os.environ["TRITON_CACHE_DIR"].startswith(os.environ["HOME"] + "/"))
"""
    config = SandboxConfig(device="cpu", tmpfs_bytes=48 << 20, home_tmpfs_bytes=160 << 20)
    worker, greeting, lines = run_worker(submission(tmp_path, probe), config)
    assert greeting.status == "ready" and worker.plan.level == "namespace"
    assert said(lines) == {"home": 160 << 20, "tmp": 48 << 20, "shm": 48 << 20, "cache_in_home": True}
    assert SandboxConfig(device="cpu").home_tmpfs_bytes >= 4 * SandboxConfig(device="cpu").tmpfs_bytes


@needs_root
def test_each_worker_gets_its_own_uid_and_gives_it_back(tmp_path: Path) -> None:
    folder = submission(tmp_path, "say(uid=os.getuid())\n")
    a = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    b = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        assert a.plan.private_uid and b.plan.private_uid
        assert a.plan.uid != b.plan.uid
        locks = [a.lease._path, b.lease._path]  # type: ignore[union-attr]
        assert all(p.exists() for p in locks)
    finally:
        a.close()
        b.close()
    assert not any(p.exists() for p in locks), "leases are released with the worker"


@needs_root
def test_submission_copy_skips_links_and_fifos_and_is_private(tmp_path: Path) -> None:
    folder = submission(tmp_path, "say(files=sorted(os.listdir(os.path.dirname(__file__))))\n")
    (folder / "link.py").symlink_to(GRADER_ROOT / "reference" / "gelu.py")
    (folder / "linkdir").symlink_to(GRADER_ROOT / "reference")
    os.mkfifo(folder / "pipe.py")
    (folder / "data").mkdir()
    (folder / "data" / "table.txt").write_text("ok")
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        copy = worker.scratch / "submission"
        st = os.stat(copy / "gelu.py")
        assert (st.st_uid, st.st_mode & 0o777) == (worker.plan.uid, 0o400)
        assert worker.wait_ready(time.monotonic() + 60).status == "ready"
    finally:
        worker.close()
    seen = said([json.loads(line) for line in worker.stdout.text().splitlines() if line.startswith("{")])
    assert seen["files"] == ["data", "gelu.py"]
    notes = "\n".join(worker.notes)
    assert "left out link.py: a symbolic link" in notes and "left out linkdir: a symbolic link" in notes
    assert "left out pipe.py: not a regular file" in notes
    assert "--- grader ---" in worker.output()


def test_plan_covers_the_checkout_and_tmp_but_never_the_runtime() -> None:
    if os.geteuid() != 0:
        assert plan_isolation(SandboxConfig(device="cpu")).level == "none"
        return
    plan = plan_isolation(SandboxConfig(device="cpu"), uid=TRANSIENT_UIDS.start, gid=TRANSIENT_UIDS.start)
    assert plan.level == "namespace" and plan.uid == TRANSIENT_UIDS.start
    assert GRADER_ROOT in plan.covers and Path("/tmp") in plan.covers
    assert GRADER_ROOT / "grader" in plan.keep
    for cover in plan.covers:
        assert not any(keep == cover or keep in cover.parents for keep in plan.keep), cover
    assert [len(c.parts) for c in plan.covers] == sorted(len(c.parts) for c in plan.covers), "outermost first"


@needs_root
def test_without_a_mount_namespace_the_worker_still_drops_to_its_own_uid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in Docker without CAP_SYS_ADMIN: unshare fails, the worker runs at the "uid" level."""
    from grader.engine.sandbox import child

    monkeypatch.setattr(child, "CLONE_NEWNS", 0x1)  # not a namespace flag: unshare() fails with EINVAL
    probe = "say(uid=os.getuid(), processes=len([p for p in os.listdir('/proc') if p.isdigit()]))\n"
    blocked = [b for b in map(blocked_ancestor, runtime_paths()) if b is not None]
    if blocked:
        with pytest.raises(WorkerUnavailable, match=f"cannot enter {blocked[0]}"):
            run_worker(submission(tmp_path, probe))
        pytest.skip(f"Python lives under {blocked[0]}, which only root may enter: the uid level cannot run here")
    worker, greeting, lines = run_worker(submission(tmp_path, probe))
    seen = said(lines)
    assert greeting.status == "ready" and worker.plan.level == "uid"
    assert seen["uid"] == worker.plan.uid and seen["uid"] in TRANSIENT_UIDS
    assert seen["processes"] > 1, "the uid level has no private /proc (docs/defenses.md)"
    assert process_ids(worker.plan.uid) == []  # type: ignore[arg-type]


@needs_root
def test_no_lease_from_a_pool_outside_the_uid_map() -> None:
    assert lease_uid(range(1 << 32, (1 << 32) + 10)) is None


# -- limits and the sweep ---------------------------------------------------------------------------


@needs_root
def test_fork_bomb_is_capped_per_worker_and_swept(tmp_path: Path) -> None:
    bomb = """
import time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    children += 1
say(children=children)
"""
    config = SandboxConfig(device="cpu", max_processes=40)
    worker, greeting, lines = run_worker(submission(tmp_path, bomb), config)
    assert greeting.status == "ready", worker.output()
    assert 0 < said(lines)["children"] < 40, "RLIMIT_NPROC counts this worker's processes only"
    assert process_ids(worker.plan.uid) == [], "every process of the transient uid is gone"  # type: ignore[arg-type]


@needs_root
def test_processes_that_leave_the_session_and_clear_their_environment_are_swept(tmp_path: Path) -> None:
    escape = """
if os.fork() == 0:
    os.setsid()
    os.execve(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"], {})
"""
    worker, greeting, _ = run_worker(submission(tmp_path, escape))
    assert greeting.status == "ready"
    assert process_ids(worker.plan.uid) == []  # type: ignore[arg-type]


def test_address_space_limit_turns_a_memory_hog_into_an_import_error(tmp_path: Path) -> None:
    hog = "hog = []\nwhile True:\n    hog.append(bytearray(64 << 20))\n"
    # torch 2.11's CUDA build (the grading pair's, on CPU too) cannot even import under 3 GiB
    worker, greeting, _ = run_worker(submission(tmp_path, hog), SandboxConfig(device="cpu", memory_bytes=6 << 30))
    assert greeting.status == "import_error", greeting
    assert "MemoryError" in greeting.message and "6 GiB" in greeting.message


def test_wall_clock_deadline_kills_a_hung_import(tmp_path: Path) -> None:
    folder = submission(tmp_path, "import time\ntime.sleep(600)\n")
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        worker.wait_ready(start + 8)
    worker.close()
    assert time.monotonic() - start < 20
    assert worker.proc is not None and worker.proc.poll() is not None


# -- output ----------------------------------------------------------------------------------------


def test_output_is_capped_and_the_rest_counted(tmp_path: Path) -> None:
    flood = "chunk = 'y' * (1 << 20)\nfor _ in range(48):\n    sys.stdout.write(chunk)\nsys.stdout.flush()\n"
    worker, greeting, _ = run_worker(submission(tmp_path, flood), SandboxConfig(device="cpu", output_bytes=4096))
    assert greeting.status == "ready"
    assert len(worker.stdout.kept) == 4096
    assert worker.stdout.dropped == 48 * (1 << 20) - 4096
    assert f"[... {48 * (1 << 20) - 4096} more bytes not kept]" in worker.output()


def test_captured_stream_keeps_the_head_and_drains_the_rest() -> None:
    read, write = os.pipe()
    stream = CapturedStream(read, 10)
    for _ in range(100):
        os.write(write, b"0123456789" * 100)
    os.close(write)
    assert stream.text() == "0123456789\n[... 99990 more bytes not kept]"


# -- the protocol ------------------------------------------------------------------------------------


FRAME = "import struct\nREPLY = int(sys.argv[sys.argv.index('--rep-fd') + 1])\n"


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("struct.pack('<Q', 5) + b'nope!'", "header is not JSON"),
        ("struct.pack('<Q', 1 << 40)", "exceeds the 1048576-byte limit"),
        ("struct.pack('<Q', 2) + b'[]'", "header is not a JSON object"),
        (
            "(lambda h: struct.pack('<Q', len(h)) + h)(json.dumps({'status': 'ready', 'blob': 1 << 40}).encode())",
            "payload size",
        ),
        ("(lambda h: struct.pack('<Q', len(h)) + h)(json.dumps({'status': 7}).encode())", "has no status"),
        (
            "(lambda h: struct.pack('<Q', len(h)) + h)(json.dumps({'status': 'import_error', 'type': 'E', "
            "'message': 'm', 'fatal': 'yes'}).encode())",
            "fatal: Input should be a valid boolean",
        ),
        (
            "(lambda h: struct.pack('<Q', len(h)) + h)(json.dumps({'status': 'ok'}).encode())",
            "a reply of status 'ok' where 'ready' or 'import_error' was due",
        ),
    ],
    ids=["not-json", "huge-header", "not-an-object", "huge-payload", "no-status", "wrong-type", "not-a-greeting"],
)
def test_a_worker_that_breaks_the_protocol_is_dead(tmp_path: Path, written: str, reason: str) -> None:
    folder = submission(tmp_path, FRAME + f"os.write(REPLY, {written})\n")
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        with pytest.raises(WorkerDied, match="broke the grader's protocol") as died:
            worker.wait_ready(time.monotonic() + 60)
        assert reason in died.value.reason
        assert worker.proc is not None and worker.proc.wait(timeout=2) == -9, "killed at once"
    finally:
        worker.close()


def test_a_worker_that_stops_reading_cannot_block_the_grader(tmp_path: Path) -> None:
    stall = FRAME + (
        "head = json.dumps({'status': 'ready'}).encode()\n"
        "os.write(REPLY, struct.pack('<Q', len(head)) + head)\n"
        "import time\ntime.sleep(600)\n"
    )
    worker = WorkerProcess(SandboxConfig(device="cpu"), submission(tmp_path, stall), "gelu", "gelu", "triton_gelu")
    try:
        assert worker.wait_ready(time.monotonic() + 60).status == "ready"
        start = time.monotonic()
        with pytest.raises(WorkerTimeout):
            worker.call(protocol.CallRequest(case={}), b"\0" * (16 << 20), start + 3, 0)
        assert time.monotonic() - start < 10
    finally:
        worker.close()


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_a_pickle_that_is_not_tensors_is_refused_without_running(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple:
            return (os.system, (f"touch {marker}",))

    with pytest.raises(protocol.ProtocolError, match="could not decode"):
        protocol.unpack_tensors(pickle.dumps({"out": Payload()}))
    assert not marker.exists()


def test_a_paused_worker_and_its_children_are_stopped_until_the_next_call(tmp_path: Path) -> None:
    """pause() stops every process of the worker (a child it left running too); call() resumes them."""
    body = """
import subprocess
child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
say(child=child.pid)
"""
    folder = submission(tmp_path, body)
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        assert worker.wait_ready(time.monotonic() + 60).status == "ready"
        worker.pause()
        assert worker.proc is not None and run_state(worker.proc.pid) == "T"
        stopped = [p for p in worker._processes() if p != worker.proc.pid]
        assert stopped and all(run_state(p) == "T" for p in stopped)
        from grader.engine.assignment.load import load_assignment
        from grader.engine.problems import REGISTRY
        from grader.engine.problems.base import generator

        (gelu,) = [p for p in load_assignment(hidden=False).problems if p.name == "gelu"]
        case = gelu.suite_cases("cpu")[0]
        inputs = REGISTRY["gelu"].make_inputs(case, generator(1))
        request = protocol.CallRequest(case=case.model_dump(), profile=False)
        reply, _ = worker.call(request, protocol.pack_tensors(inputs), time.monotonic() + 60, 1 << 26)
        assert isinstance(reply, protocol.Called), reply
        assert not worker.paused and run_state(worker.proc.pid) != "T"
        assert all(run_state(p) != "T" for p in stopped)
    finally:
        worker.close()


# -- the start in two steps -------------------------------------------------------------------------


def test_a_worker_runs_nothing_of_the_submission_before_it_is_told_to_start(tmp_path: Path) -> None:
    """Its imports need no hold of the GPU (grader/engine/orchestrator/gpu_lease.py) only because nothing of
    the submission runs in them: its module is imported after StartRequest, never before."""
    folder = submission(tmp_path, "say(imported=True)\n")
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    try:
        worker.wait_imported(time.monotonic() + 60)
        assert worker.imported and not worker.ready
        time.sleep(0.5)  # time enough to run the submission's import, were the worker going on
        early = worker.stdout.text()
        greeting = worker.wait_ready(time.monotonic() + 60)
        assert greeting.status == "ready" and worker.ready
    finally:
        worker.close()
    assert "imported" not in early
    assert said([json.loads(line) for line in worker.stdout.text().splitlines() if line.startswith("{")]) == {
        "imported": True
    }


def test_a_worker_closed_before_it_started_exits_without_the_submission(tmp_path: Path) -> None:
    folder = submission(tmp_path, "say(imported=True)\n")
    worker = WorkerProcess(SandboxConfig(device="cpu"), folder, "gelu", "gelu", "triton_gelu")
    worker.wait_imported(time.monotonic() + 60)
    started = time.monotonic()
    worker.close()
    assert time.monotonic() - started < 10  # it read the exit request; nothing had to be killed
    assert "imported" not in worker.stdout.text()
