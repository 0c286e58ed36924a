"""`grader batch --backend ray` on a real two-node Ray cluster on this machine.

A head and a second node (`ray start`), each with one unit of a custom resource standing in for a
GPU, so each grades one student at a time. The second node is killed, every process of it, while
it grades; the batch must still end with every student graded once, as the local backend grades
them, and a second run must grade nothing again.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.grader.backend_support import batch, grades, local_gradebook, rows, stamps, start_batch

pytestmark = pytest.mark.slow

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install '.[cluster]')")

SLOT = "grader_slot"
HEAD_IP, SECOND_IP = "127.0.0.2", "127.0.0.3"
HEALTH = {
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}
RAY = shutil.which("ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it (by parent links: a child in its own session counts too)."""
    tree, found, todo = _children(), [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += tree.get(current, [])
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def kill_tree(pid: int) -> int:
    """Every process of a node at once, as when its machine dies; returns how many."""
    pids = descendants(pid)
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(pids)


class Node:
    """One `ray start --block` in its own session, so that it and everything it starts can be found."""

    def __init__(self, args: list[str], temp: Path, name: str) -> None:
        self.log = open(temp / f"{name}.log", "w")
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self.proc = subprocess.Popen(
            [RAY, "start", "--block", *args],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )

    def grading(self) -> str | None:
        """The student whose `grader grade` runs below this node, if any (from its scratch folder)."""
        for pid in descendants(self.proc.pid):
            found = re.search(r"grader\.cli grade \S*/grader-ray-(\S+)-[^-/\s]+/", _cmdline(pid))
            if found:
                return found.group(1)
        return None

    def node_id(self) -> str:
        """Ray's id of this node, as the gradebook shows it (its first 8 digits)."""
        for pid in descendants(self.proc.pid):
            found = re.search(r"--node_id=([0-9a-f]+)", _cmdline(pid))
            if found:
                return found.group(1)[:8]
        raise AssertionError("no raylet below this node")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # ray start --block stops what it started
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        kill_tree(self.proc.pid)
        self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, Node, Node]]:
    if RAY is None:
        pytest.skip("the `ray` command is missing (pip install '.[cluster]')")
    temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: Ray's socket paths are capped
    # Two loopback addresses, one per node: Ray turns 127.0.0.1 into the machine's outside
    # address, and the test must talk to this machine through loopback only. The test cluster
    # has no token (Ray's token auth is for clusters that others can reach).
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", *HEALTH)}
    os.environ["RAY_AUTH_MODE"] = "disabled"
    port = _free_port()
    address = f"{HEAD_IP}:{port}"
    resources = ["--num-cpus=1", f"--resources={json.dumps({SLOT: 1})}", "--disable-usage-stats"]
    # a lost node is noticed within a few seconds instead of Ray's default half minute
    os.environ.update(HEALTH)
    head = Node(
        [
            "--head",
            f"--port={port}",
            f"--node-ip-address={HEAD_IP}",
            "--include-dashboard=false",
            f"--temp-dir={temp}",
            *resources,
        ],
        temp,
        "head",
    )
    nodes = [head]
    try:
        _wait_nodes(address, 1, head)
        second = Node([f"--address={address}", f"--node-ip-address={SECOND_IP}", *resources], temp, "second")
        nodes.append(second)
        _wait_nodes(address, 2, second)
        yield address, head, second
    finally:
        for node in reversed(nodes):
            node.stop()
        shutil.rmtree(temp, ignore_errors=True)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _wait_nodes(address: str, count: int, node: Node, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if node.proc.poll() is not None:
            pytest.fail(f"ray start exited with {node.proc.returncode}: {Path(node.log.name).read_text()[-2000:]}")
        status = subprocess.run([RAY, "status", f"--address={address}"], capture_output=True, text=True)
        if status.returncode == 0 and status.stdout.count("node_") >= count:
            return
        time.sleep(1)
    pytest.fail(f"the Ray cluster at {address} did not show {count} node(s) within {timeout:g} s")


def test_two_nodes_one_killed_mid_batch(cluster: tuple[str, Node, Node], tmp_path: Path) -> None:
    address, head, second = cluster
    expected = local_gradebook(tmp_path / "local")

    out = tmp_path / "ray"
    argv = ["--backend", "ray", "--ray-address", address, "--ray-resources", json.dumps({"CPU": 1, SLOT: 1})]
    nodes = {head.node_id(): "head", second.node_id(): "second"}
    driver = start_batch(out, *argv)
    deadline = time.monotonic() + 180
    while (lost := second.grading()) is None:
        assert driver.poll() is None, (
            f"the batch ended before the second node graded anyone:\n{driver.communicate()[0][-3000:]}"
        )
        assert time.monotonic() < deadline, "the second node never started a grading"
        time.sleep(0.2)
    assert kill_tree(second.proc.pid) > 3  # the raylet, its workers, the grading and its worker at least
    text, _ = driver.communicate(timeout=420)
    assert driver.returncode == 0, text[-4000:]

    assert grades(out) == expected, text[-3000:]
    book = rows(out)
    assert all(r["error"] == "" for r in book), book
    graded_on = {r["student"]: nodes.get(r["gpu"].rsplit(":", 1)[-1].rstrip(")")) for r in book}  # "cpu (node host:id)"
    assert set(graded_on.values()) <= {"head", "second"}, book
    assert graded_on[lost] == "head", f"{lost} was being graded on the killed node; its row: {book}"
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["mode"], summary["missing"], summary["students"]) == ("ray", 0, len(expected))
    for student in expected:
        assert (out / student / "report.html").is_file() and (out / student / "gradescope" / "results.json").is_file()

    before = stamps(out)
    batch(out, *argv)  # resume: every result is there, so nothing is graded or written again
    assert stamps(out) == before and rows(out) == book
