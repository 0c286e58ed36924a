"""The service as a course runs it: `grader serve` on a SQLite file (a real uvicorn on a free port),
`grader tokens` for a roster of three, `grader submit` of the bundled examples, the refusals, a
`kill -9` of the server in the middle of a grading, and the three pages in Chromium.

On the CPU (Triton's interpreter), with --problems to keep each grading to seconds. One server
and one class for the whole module: the tests below run in order, each on what the one before
left (about two minutes on two cores).
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = ROOT / "examples" / "submissions"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def grader(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "grader.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )


@dataclass
class Course:
    folder: Path
    port: int
    tokens: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    jobs: dict[str, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.folder / "serve.log", "ab")  # noqa: SIM115 - the server's for its lifetime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", "serve", "--db", str(self.folder / "grades.sqlite")]
            + ["--port", str(self.port), "--device", "cpu", "--quota", "1"],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                self.api("GET", "/api/leaderboard")
                return
            except OSError:
                assert self.proc.poll() is None, (self.folder / "serve.log").read_text()
                time.sleep(0.3)
        raise AssertionError("the server did not start")

    def api(self, method: str, path: str, who: str | None = None, data: bytes | None = None) -> Any:
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if who:
            request.add_header("Authorization", f"Bearer {self.tokens[who]}")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def submit(self, who: str, example: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return grader(
            "submit", str(EXAMPLES / example), "--server", self.url, *extra, env={"GRADER_TOKEN": self.tokens[who]}
        )

    def wait(self, job_id: int, timeout: float = 240) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            view = self.api("GET", f"/api/submissions/{job_id}", self.owner(job_id))
            if view["state"] not in ("queued", "running"):
                return view  # type: ignore[no-any-return]
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} did not finish")

    def owner(self, job_id: int) -> str:
        return next(label.split("-")[0] for label, job in self.jobs.items() if job == job_id)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Course]:
    folder = tmp_path_factory.mktemp("course")
    roster = folder / "roster.csv"
    roster.write_text("student_id,name,email\nalice,Alice,a@x.edu\nbob,Bob,b@x.edu\ncarol,Carol,c@x.edu\n")
    made = grader("tokens", "--db", str(folder / "grades.sqlite"), "--roster", str(roster), "--staff", "ta")
    assert made.returncode == 2 and "--out" in made.stderr  # tokens are shown once: a file is needed
    made = grader(
        "tokens", "--db", str(folder / "grades.sqlite"), "--roster", str(roster), "--staff", "ta",
        "--out", str(folder / "tokens.csv"),
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert (folder / "tokens.csv").stat().st_mode & 0o077 == 0
    tokens = {row["student_id"]: row["token"] for row in csv.DictReader(open(folder / "tokens.csv"))}
    course = Course(folder, free_port(), tokens)
    course.start()
    try:
        yield course
    finally:
        if course.proc is not None and course.proc.poll() is None:
            course.proc.send_signal(signal.SIGINT)
            try:
                course.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                course.proc.kill()


def test_three_students_submit_the_examples(course: Course) -> None:
    # the correct example runs its public tests here first, as `grader pack` does; the others skip them
    runs = {
        "alice": ("correct", ["--problems", "gelu"]),
        "bob": ("partial", ["--problems", "matmul", "--no-tests"]),  # its matmul ignores `activation`
        "carol": ("cheating", ["--problems", "gelu", "--no-tests"]),
    }
    done = {who: course.submit(who, example, *extra) for who, (example, extra) in runs.items()}
    for who, run in done.items():
        assert "submitted as #" in run.stderr, (who, run.stdout, run.stderr)
        course.jobs[who] = int(run.stderr.split("submitted as #")[1].split()[0])
    alice, bob, carol = done["alice"], done["bob"], done["carol"]
    assert alice.returncode == 0 and "public tests passed" in alice.stderr
    assert "gelu" in alice.stdout and "10 / 15" in alice.stdout
    assert bob.returncode == 1 and "partial" in bob.stdout and "13.33 / 35" in bob.stdout
    assert carol.returncode == 1 and "failed" in carol.stdout
    cheat = course.api("GET", f"/api/submissions/{course.jobs['carol']}", "carol")["result"]
    assert "aten::gelu" in (cheat["problems"][0]["kernel_check"] or "")
    listing = grader("submissions", "--server", course.url, env={"GRADER_TOKEN": course.tokens["alice"]})
    assert listing.returncode == 0 and "10 / 15" in listing.stdout and "test 0/hour" in listing.stderr


def test_refusals(course: Course) -> None:
    again = course.submit("alice", "correct", "--problems", "gelu", "--no-tests")
    assert again.returncode == 2 and "quota: 1 test submission(s) per hour, all used; the next one at" in again.stderr
    peek = grader(
        "submissions", "--id", str(course.jobs["alice"]), "--server", course.url,
        env={"GRADER_TOKEN": course.tokens["bob"]},
    )  # fmt: skip
    assert peek.returncode == 2 and f"no submission {course.jobs['alice']} of yours" in peek.stderr
    assert "10 / 15" not in peek.stdout
    with pytest.raises(urllib.error.HTTPError) as bad:
        course.api("POST", "/api/submissions?mode=final&name=x.tar.gz", "bob", b"\x1f\x8b garbage")
    assert bad.value.code == 422 and "bad archive" in json.loads(bad.value.read())["error"]
    missing = grader(
        "submit", str(EXAMPLES / "correct"), "--server", course.url, "--no-tests", env={"GRADER_TOKEN": ""}
    )
    assert missing.returncode == 2 and "--token" in missing.stderr
    wrong = course.submit("alice", "correct", "--no-tests", "--token", "gks_not-a-token")
    assert wrong.returncode == 2 and "this token is not valid" in wrong.stderr


def test_a_server_killed_mid_grading_finishes_the_job_after_a_restart(course: Course) -> None:
    run = course.submit("alice", "correct", "--problems", "gelu", "--mode", "final", "--no-tests", "--no-wait")
    assert run.returncode == 0, run.stderr
    course.jobs["alice-final"] = job = int(run.stderr.split("submitted as #")[1].split()[0])
    deadline = time.monotonic() + 60
    while not [j for j in course.api("GET", "/api/staff/queue", "ta")["running"] if j["id"] == job]:
        assert time.monotonic() < deadline, "the final never started"
        time.sleep(0.2)
    time.sleep(3)  # well inside the grading: its `grader grade` child is at work
    assert course.proc is not None
    course.proc.send_signal(signal.SIGKILL)
    course.proc.wait()
    course.start()
    deadline = time.monotonic() + 240
    while [
        j
        for j in sum((course.api("GET", "/api/staff/queue", "ta")[k] for k in ("queued", "running")), [])
        if j["id"] == job
    ]:
        assert time.monotonic() < deadline, "the final did not finish after the restart"
        time.sleep(0.5)
    view = course.api("GET", f"/api/submissions/{job}", "alice")
    # a withheld final shows its student nothing but "received": no state, no times
    assert view["state"] == "received" and view["result"] is None and "staff publish" in view["withheld"]
    assert view["started_at"] is None and view["finished_at"] is None
    from grader.course.service import db, store

    row = store.get(db.open_db(str(course.folder / "grades.sqlite")), job)
    assert row is not None and row.attempts == 2 and row.pid is None  # graded again, by the new server
    assert (course.folder / "grades.sqlite.files" / "jobs" / str(job) / "attempt-1").is_dir()
    before = course.api("GET", "/api/submissions", "alice")["submissions"]
    assert {r["id"] for r in before} == {course.jobs["alice"], job}  # nothing lost
    staff = course.api("GET", "/api/staff/queue", "ta")
    assert staff["counts"]["alice"] == {"graded": 2}
    course.api("POST", "/api/staff/publish", "ta")
    final = course.api("GET", f"/api/submissions/{job}", "alice")
    assert final["result"]["problems"][0]["status"] == "passed"
    assert "restart" not in final["result"]["error"]


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium is not installed (scripts/setup-browser.sh)")
def test_the_three_pages_in_chromium(course: Course) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = browser.new_page()
            page.goto(f"{course.url}/leaderboard")
            rows = page.locator("#leaderboard tbody tr")
            assert rows.count() == 1  # alice's published final; the cheat is never ranked
            assert "alice" not in rows.first.inner_text().lower() and "10 / 15" in rows.first.inner_text()

            page.goto(f"{course.url}/me")
            assert page.url.endswith("/login")
            page.fill("#token", course.tokens["bob"])
            page.click("button[type=submit]")
            # The URL changes when the navigation commits, before the page has loaded: wait for the load.
            page.wait_for_url("**/me", wait_until="load")
            sync_api.expect(page.locator("#submissions tbody tr")).to_have_count(1)
            assert "13.33 / 35" in page.inner_text("#submissions")
            page.click("#submissions a")
            page.wait_for_url(f"**/me/submissions/{course.jobs['bob']}", wait_until="load")
            assert "matmul" in page.content() and "activation" in page.content()
            page.goto(f"{course.url}/me/submissions/{course.jobs['alice']}")
            assert "no such submission of yours" in page.content()

            staff = browser.new_page()
            staff.goto(f"{course.url}/login")
            staff.fill("#token", course.tokens["ta"])
            staff.click("button[type=submit]")
            staff.wait_for_url("**/staff", wait_until="load")
            sync_api.expect(staff.locator("#counts tbody tr")).to_have_count(3)
            staff.fill("#n", "1")
            staff.click("#rerun-top")
            sync_api.expect(staff.locator("#reruns tbody tr")).to_have_count(1)
        finally:
            browser.close()


def test_the_log_tells_each_grading_and_ctrl_c_stops_the_server_cleanly(course: Course) -> None:
    """The staff's terminal shows the queue, not only web requests; Ctrl-C is how a server stops."""
    alice, carol = course.jobs["alice"], course.jobs["carol"]
    log = (course.folder / "serve.log").read_text()
    assert f"grading job {alice} (test of alice, gelu, attempt 1)" in log
    assert f"job {alice} (test of alice, gelu): graded, 10 / 15 in " in log
    assert f"job {carol} (test of carol, gelu): graded, 0 / 15 in " in log
    assert course.proc is not None
    course.proc.send_signal(signal.SIGINT)
    assert course.proc.wait(timeout=60) == 0
    log = (course.folder / "serve.log").read_text()
    assert "stopped; the gradings in flight are queued for the next start" in log and "interrupted" not in log
