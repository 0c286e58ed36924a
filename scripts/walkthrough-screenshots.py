#!/usr/bin/env python3
"""The screenshots of docs/walkthrough.md, made again from scratch: a student's reports and the service's pages.

    .venv/bin/python scripts/walkthrough-screenshots.py [--out docs/img] [--keep DIR]

What it does, on the CPU (Triton's interpreter), in a temporary folder:

1. `grader grade` of examples/submissions/partial and of a student's copy of the correct example
   with two mistakes (the GeLU kernel's mask removed: an out-of-bounds tl.load; a softmax whose
   block holds the whole row: too large to compile for a GPU), then each report.html in Chromium:
   its top (the summary, the first failures) and its softmax section.
2. `grader tokens` for a roster of two and a staff member, a throwaway `grader serve` on a free
   port with a database of its own, `grader submit` by both students (bob a final of the correct
   example, alice a test-mode submission of the partial one, queued behind it), the staff's
   publish, then the pages: alice's submissions while she waits and once graded, her result, the
   leaderboard, the staff page.
3. The server stopped (SIGINT, and a kill of whatever it started that is still there, by pid),
   the temporary folder removed (unless --keep).

Each command it runs is printed with its output: the transcripts docs/walkthrough.md quotes.
Chromium is Debian's (/usr/bin/chromium, scripts/setup-browser.sh), driven by Playwright.
Takes about three minutes on two cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "submissions"
CHROMIUM = Path("/usr/bin/chromium")
WIDTH = 1200
#: a screenshot stops here at the latest (a report of every case is several screens long: its
#: summary and first failures are shown whole, a problem further down by a screenshot of its own)
MAX_HEIGHT = 1500
#: where a report's failures end: the top of its first problem that passed (they are listed last)
FIRST_PASSED = """() => {
  const badge = document.querySelector("section.problem h2 .badge.passed");
  return badge ? badge.closest("section").getBoundingClientRect().top + window.scrollY - 16 : null;
}"""


def show(command: list[str], result: subprocess.CompletedProcess[str]) -> None:
    """The command as typed from the repository root, then what it wrote (stdout and stderr in their order)."""
    shown = " ".join(str(Path(c).relative_to(ROOT)) if c.startswith(str(ROOT) + "/") else c for c in command)
    print(f"$ {shown}\n{result.stdout}[exit {result.returncode}]\n", flush=True)


def grader(*args: str, token: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`grader ARGS` as a student or a TA types it, from the repository root; printed with its output."""
    env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(ROOT)}
    if token is not None:
        env["GRADER_TOKEN"] = token
    result = subprocess.run(
        [sys.executable, "-m", "grader.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    show(["grader", *args], result)
    if check and result.returncode not in (0, 1):
        raise SystemExit(f"grader {args[0]} failed (exit {result.returncode})")
    return result


def student_copy(folder: Path) -> Path:
    """The correct example with the two mistakes docs/walkthrough.md shows: no mask, a whole-row block."""
    shutil.copytree(EXAMPLES / "correct", folder)
    edits = {
        "gelu.py": [
            ("    mask = offs < n\n    x = tl.load(x_ptr + offs, mask=mask)", "    x = tl.load(x_ptr + offs)"),
            (".to(y_ptr.dtype.element_ty), mask=mask)", ".to(y_ptr.dtype.element_ty))"),
        ],
        "softmax.py": [
            (
                "    block = min(triton.next_power_of_2(n), 2048)",
                "    block = triton.next_power_of_2(n)  # one block holds the whole row",
            )
        ],
    }
    for name, replacements in edits.items():
        text = (folder / name).read_text()
        for old, new in replacements:
            assert old in text, f"examples/submissions/correct/{name} changed: update this script's edit"
            text = text.replace(old, new)
        (folder / name).write_text(text)
    return folder


def shoot(page: Any, path: Path, *, failures_only: bool = False) -> None:
    """The page from its top to the end of its content, `WIDTH` wide, at most `MAX_HEIGHT` tall (a report:
    down to its first passed problem, since failures come first)."""
    height = page.evaluate("Math.ceil(document.body.getBoundingClientRect().bottom + window.scrollY) + 24")
    if failures_only:
        height = page.evaluate(FIRST_PASSED) or height
    clip = {"x": 0, "y": 0, "width": WIDTH, "height": min(height, MAX_HEIGHT)}
    page.screenshot(path=str(path), full_page=True, clip=clip)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({path.stat().st_size // 1024} KiB)")


def shoot_problem(page: Any, problem: str, path: Path) -> None:
    """One problem's section of a report: its failed tests, the passed ones folded as the report folds them."""
    page.locator(f"section.problem#{problem}").screenshot(path=str(path))
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path} ({path.stat().st_size // 1024} KiB)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api(url: str, path: str, token: str, method: str = "GET") -> Any:
    request = urllib.request.Request(url + path, method=method, data=b"" if method == "POST" else None)
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def descendants(pid: int) -> list[tuple[int, str]]:
    """Every live process below `pid`, as (pid, start time): what a stop must not leave behind."""
    parents: dict[int, int] = {}
    started: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
            started[int(entry.name)] = fields[19]
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += [(c, started[c]) for c in children]
        todo += children
    return found


def still_running(pid: int, start: str) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[19] == start
    except OSError:
        return False


@contextmanager
def serve(folder: Path) -> Iterator[str]:
    """A `grader serve` of its own (database, files, port) for the walk; stopped, and nothing of it left, on leaving."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = ["serve", "--db", str(folder / "grades.sqlite"), "--port", str(port), "--device", "cpu"]
    log = open(folder / "serve.log", "wb")  # noqa: SIM115 - the server's, for its lifetime
    server = subprocess.Popen(
        [sys.executable, "-m", "grader.cli", *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    print(f"$ grader {' '.join(command)}   (pid {server.pid}, log {folder / 'serve.log'})", flush=True)
    seen: set[tuple[int, str]] = set()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/leaderboard", timeout=5).close()
                break
            except (OSError, urllib.error.URLError):
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("grader serve did not start:\n" + (folder / "serve.log").read_text()) from None
                time.sleep(0.3)
        yield url
    finally:
        seen.update(descendants(server.pid))
        if server.poll() is None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
        log.close()
        left = [pid for pid, start in seen if still_running(pid, start)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        after = f"killed {left}, left by it" if left else "nothing left"
        print(f"server stopped (exit {server.returncode}); {after}")
        lines = (folder / "serve.log").read_text().splitlines()
        print("server log, its first and last lines:\n" + "\n".join([*lines[:6], "…", *lines[-8:]]))


def wait_for(url: str, token: str, states: tuple[str, ...], timeout: float = 600) -> list[dict[str, Any]]:
    """The student's submissions once every one of them is in one of `states`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = api(url, "/api/submissions", token)["submissions"]
        if jobs and all(j["state"] in states for j in jobs):
            return jobs  # type: ignore[no-any-return]
        time.sleep(0.5)
    raise SystemExit(f"submissions not {'/'.join(states)} after {timeout} s")


def idle(url: str, staff_token: str, timeout: float = 600) -> None:
    """Once the service's queue is empty and nothing is grading (the staff's view)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        queue = api(url, "/api/staff/queue", staff_token)
        if not queue["queued"] and not queue["running"]:
            return
        time.sleep(0.5)
    raise SystemExit(f"the queue is not empty after {timeout} s")


def reports(work: Path, browser: Any, out: Path) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    students = [
        ("partial", EXAMPLES / "partial", "report-partial-softmax.png"),  # long rows: public tests pass, hidden fail
        ("out-of-bounds", student_copy(work / "mine"), "report-compile-only.png"),  # the block past Triton's limit
    ]
    for name, folder, softmax in students:
        grader("grade", str(folder), "--out", str(work / name), "--device", "cpu")
        page.goto((work / name / "report.html").as_uri())
        shoot(page, out / f"report-{name}.png", failures_only=True)
        shoot_problem(page, "softmax", out / softmax)
    page.close()


def service(work: Path, browser: Any, out: Path) -> None:
    course = work / "course"
    course.mkdir()
    roster = course / "roster.csv"
    roster.write_text("student_id,name,email\nalice,Alice,alice@example.edu\nbob,Bob,bob@example.edu\n")
    db = str(course / "grades.sqlite")
    grader("tokens", "--db", db, "--roster", str(roster), "--staff", "ta", "--out", str(course / "t.csv"))
    tokens = {row["student_id"]: row["token"] for row in csv.DictReader(open(course / "t.csv", encoding="utf-8"))}
    with serve(course) as url:
        # bob's final first, so that alice's test waits in the queue behind it (one grading at a time on a CPU)
        bob = ["submit", str(EXAMPLES / "correct"), "--server", url, "--mode", "final", "--no-tests", "--no-wait"]
        grader(*bob, token=tokens["bob"])
        alice = ["grader", "submit", str(EXAMPLES / "partial"), "--server", url, "--mode", "test"]
        env = {**os.environ, "COLUMNS": "100", "PYTHONPATH": str(ROOT), "GRADER_TOKEN": tokens["alice"]}
        waiting = subprocess.Popen(
            [sys.executable, "-m", "grader.cli", *alice[1:]], cwd=ROOT, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        try:
            page = browser.new_page(viewport={"width": WIDTH, "height": 700})
            page.goto(f"{url}/login")
            shoot(page, out / "service-login.png")
            page.fill("#token", tokens["alice"])
            page.click("button[type=submit]")
            page.wait_for_url("**/me", wait_until="load")
            wait_for(url, tokens["alice"], ("queued", "running", "graded", "error"))  # uploaded after its local tests
            page.reload(wait_until="load")
            shoot(page, out / "service-me-waiting.png")
            stdout, _ = waiting.communicate(timeout=900)
            show(alice, subprocess.CompletedProcess(alice, waiting.returncode, stdout))
        finally:
            if waiting.poll() is None:  # this script failed while alice waited: end her `grader submit`
                waiting.kill()
                waiting.wait()
        job = wait_for(url, tokens["alice"], ("graded", "error"))[0]["id"]
        idle(url, tokens["ta"])  # bob's final too: he sees it only as "received" until staff publish
        grader("submissions", "--server", url, token=tokens["alice"])
        print("$ (staff) POST /api/staff/publish:", api(url, "/api/staff/publish", tokens["ta"], "POST"), "\n")
        page.reload(wait_until="load")
        shoot(page, out / "service-me.png")
        page.goto(f"{url}/me/submissions/{job}", wait_until="load")
        shoot(page, out / "service-result.png", failures_only=True)
        page.goto(f"{url}/leaderboard", wait_until="load")
        shoot(page, out / "service-leaderboard.png")
        staff = browser.new_page(viewport={"width": WIDTH, "height": 700})
        staff.goto(f"{url}/login")
        staff.fill("#token", tokens["ta"])
        staff.click("button[type=submit]")
        staff.wait_for_url("**/staff", wait_until="load")
        shoot(staff, out / "service-staff.png")
        page.close()
        staff.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the PNGs go (docs/img)")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep the gradings and the server's files here (a new folder)"
    )
    args = parser.parse_args()
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing: scripts/setup-browser.sh installs it", file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright

    args.out = args.out.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        print(f"--keep {args.keep}: not empty; give a new folder", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="walkthrough-")) if args.keep is None else args.keep.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
            try:
                reports(work, browser, args.out)
                service(work, browser, args.out)
            finally:
                browser.close()
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
