"""Issue 52: a student of the course attacks the running service from this machine (127.0.0.1).

Each test runs one attack in a bounded loop against a real uvicorn (live_support) and checks
that it is refused, beside an honest request that must still succeed.
"""

from __future__ import annotations

import io
import json
import os
import socket
import tarfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from grader.course.leaderboard.names import SALT_ENV, pseudonym
from grader.course.service import limits, store
from grader.course.service.connections import GuardedH11Protocol
from grader.course.service.serving import ServeOptions, make_server
from grader.engine.spec.model import Service
from tests.grader.course.service.live_support import Live, live
from tests.grader.course.service.service_support import ALIAS_SECRET, archive, settle


def test_made_up_tokens_share_one_budget_and_are_refused(tmp_path: Path) -> None:
    with live(tmp_path, rate=30, anonymous_rate=20) as s:
        codes = [
            s.http.get("/api/leaderboard", headers={"Authorization": f"Bearer gks_fake{n}"}).status_code
            for n in range(300)
        ]
        assert codes.count(401) == 20 and codes.count(429) == 280  # refused; the 21st on waits a minute
        assert s.http.get("/api/leaderboard").status_code == 429  # no token: the same shared budget
        assert s.http.get("/api/me", headers=s.as_("alice")).status_code == 200  # a real student is served
        assert s.server.limiter.clients == 1 and s.server.anonymous.clients == 1  # no entry per made-up token


def test_made_up_tokens_cannot_flush_a_students_count(tmp_path: Path) -> None:
    with live(tmp_path, rate=5, anonymous_rate=10_000) as s:
        assert [s.http.get("/api/me", headers=s.as_("alice")).status_code for _ in range(6)][-1] == 429
        for n in range(500):
            fake = s.http.get("/api/me", headers={"Authorization": f"Bearer gks_flush{n}"})
            assert fake.status_code == 401
        assert s.http.get("/api/me", headers=s.as_("alice")).status_code == 429  # still counted
        assert s.http.get("/api/me", headers=s.as_("bob")).status_code == 200
        assert s.server.limiter.clients == 2


def test_a_withheld_final_shows_no_state_and_no_times_until_published(tmp_path: Path) -> None:
    with live(tmp_path) as s:
        honest = s.submit("alice").json()["id"]
        final = s.submit("alice", mode="final").json()["id"]
        seen = set()
        for _ in range(200):  # polled while it is queued, graded and done, as the attack did
            view = s.http.get(f"/api/submissions/{final}", headers=s.as_("alice")).json()
            seen.add((view["state"], view["started_at"], view["finished_at"], "ahead" in view))
            if store.get(s.server.engine, final).state == "graded":  # type: ignore[union-attr]
                break
            time.sleep(0.02)
        settle(s.server, final)
        view = s.http.get(f"/api/submissions/{final}", headers=s.as_("alice")).json()
        seen.add((view["state"], view["started_at"], view["finished_at"], "ahead" in view))
        assert seen == {("received", None, None, False)}
        listing = s.http.get("/api/submissions", headers=s.as_("alice")).json()["submissions"]
        assert {r["id"]: r["state"] for r in listing} == {final: "received", honest: "graded"}
        report = s.http.get(f"/api/submissions/{final}/report", headers=s.as_("alice"))
        assert report.status_code == 404 and "graded" not in report.text and "staff publish" in report.text
        page = s.http.get("/me", headers={"cookie": f"grader_token={s.tokens['alice']}"}).text
        assert "state-graded" in page and page.count("state-received") == 1  # the test job; the final
        # the honest view of a test job keeps its state and times; a published final gets them back
        assert s.http.get(f"/api/submissions/{honest}", headers=s.as_("alice")).json()["finished_at"]
        assert s.http.post("/api/staff/publish", headers=s.as_("ta")).status_code == 200
        shown = s.http.get(f"/api/submissions/{final}", headers=s.as_("alice")).json()
        assert shown["state"] == "graded" and shown["finished_at"] and shown["result"]["score"] == 10.0


def test_aliases_are_keyed_by_a_secret_and_rows_carry_no_time(tmp_path: Path) -> None:
    with live(tmp_path, device="cuda") as s:
        for who in ("alice", "bob"):
            settle(s.server, s.submit(who, mode="benchmark").json()["id"])
        rows = s.http.get("/api/leaderboard").json()["rows"]
        assert len(rows) == 2 and all(set(r) == {"rank", "name", "score", "max_score", "speedup", "mode"} for r in rows)
        # the attack: a class list and the readable salt (the assignment's name) name every alias
        public = s.server.assignment.assignment.name
        guesses = {pseudonym(who, public) for who in ("alice", "bob", "ta")}
        assert not guesses & {r["name"] for r in rows}
        assert {r["name"] for r in rows} == {pseudonym(who, ALIAS_SECRET) for who in ("alice", "bob")}
        page = s.http.get("/leaderboard").text
        assert str(datetime.now(timezone.utc).year) not in page  # no graded-at time on the public page
    with live(tmp_path / "none", alias_secret=None) as s:  # no secret: no leaderboard rather than a weak one
        refused = s.http.get("/api/leaderboard")
        assert refused.status_code == 503 and "pseudonym secret" in refused.json()["error"]
        assert s.http.get("/leaderboard").status_code == 503
        assert s.http.get("/api/me", headers=s.as_("alice")).status_code == 200


def test_serve_draws_and_keeps_a_pseudonym_secret_and_refuses_a_short_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SALT_ENV, raising=False)
    options = ServeOptions(db=str(tmp_path / "grades.sqlite"), device="cpu")
    first = make_server(options, start_queue=False).alias_secret
    kept = tmp_path / "grades.sqlite.files" / "leaderboard-secret"
    assert first and len(first) == 64 and kept.stat().st_mode & 0o077 == 0
    assert make_server(options, start_queue=False).alias_secret == first  # a restart keeps the aliases
    monkeypatch.setenv(SALT_ENV, "triton-kernels")
    with pytest.raises(RuntimeError, match="at least 16"):
        make_server(options, start_queue=False)


def slow_upload(s: Live, who: str, data: bytes, pause_until: float) -> tuple[int, dict[str, Any]]:
    """A final whose headers and first half leave before `pause_until` and the rest after it."""
    head = (
        f"POST /api/submissions?mode=final&name=submission.tar.gz HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n"
        f"Authorization: Bearer {s.tokens[who]}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", s.port), timeout=30) as sock:
        sock.sendall(head + data[: len(data) // 2])
        time.sleep(max(0.0, pause_until - time.time()))
        sock.sendall(data[len(data) // 2 :])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, json.loads(answer.split(b"\r\n\r\n", 1)[1])


@pytest.mark.parametrize("late", ["accept", "refuse"])
def test_lateness_is_judged_when_the_upload_is_accepted(tmp_path: Path, late: str) -> None:
    deadline = datetime.now(timezone.utc) + timedelta(seconds=2.5)
    with live(tmp_path, Service(deadline=deadline, late=late), quota=100) as s:
        honest = s.submit("bob", mode="final")  # in one go, before the deadline: on time
        assert honest.status_code == 202 and honest.json()["late"] is False
        status, body = slow_upload(s, "alice", archive(), deadline.timestamp() + 0.5)  # begun before, ended after
        if late == "accept":
            assert status == 202 and body["late"] is True
            job = store.get(s.server.engine, body["id"])
            assert job is not None and job.created_at > deadline.timestamp()
            assert s.submit("alice", mode="final").json()["late"] is True  # in one go, after: the same
        else:
            assert status == 403 and body["limit"] == "deadline"
            assert [j.person_id for j in store.all_jobs(s.server.engine)] == ["bob"]


def bomb() -> bytes:
    """1.2 MiB of noise and 60 MiB of zeros that `grader batch`'s caps would unpack whole, then a
    member named twice (refused only while writing): the attack's archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        members = [("noise", os.urandom(1_200_000))] + [(f"zeros{n}", bytes(15 << 20)) for n in range(4)]
        for name, data in [*members, ("gelu.py", b"x = 1\n"), ("gelu.py", b"x = 2\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def written() -> int:
    """Bytes this process (the server's threads among them) has passed to write calls."""
    return int(Path("/proc/self/io").read_text().split("wchar:")[1].split()[0])


def test_refused_uploads_are_cheap_and_counted(tmp_path: Path) -> None:
    data = bomb()
    with live(tmp_path, quota=100) as s:
        s.server.refusals.per_hour = 3
        before = written()
        for _ in range(3):
            refused = s.submit("alice", data=data)
            assert refused.status_code == 422 and "bytes uncompressed" in refused.json()["error"]
        # each refusal wrote the upload to scratch (and sent it): nothing of what it inflates to
        assert written() - before < 3 * 3 * len(data)
        assert s.submit("alice", data=b"\0" * (5 << 20)).status_code == 429  # the budget is spent: unread
        spent = s.submit("alice")  # an honest upload of hers waits too: refusals are not free
        assert spent.status_code == 429 and spent.json()["limit"] == "refused uploads"
        assert s.submit("bob").status_code == 202  # another student is not affected
        assert s.http.get("/api/me", headers=s.as_("alice")).status_code == 200


def test_idle_connections_cannot_exhaust_the_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(GuardedH11Protocol, "header_timeout_s", 2.0)
    monkeypatch.setattr(limits, "BODY_TIMEOUT_S", 2.0)
    with live(tmp_path) as s:
        idle = [socket.create_connection(("127.0.0.1", s.port), timeout=10) for _ in range(205)]
        half = socket.create_connection(
            ("127.0.0.1", s.port), timeout=10, source_address=("127.0.0.2", 0)
        )  # headers never finished
        half.sendall(b"GET /api/me HTTP/1.1\r\nHost: x\r\n")
        try:
            # another address is served at once: one address holds at most MAX_PER_ADDRESS of them
            other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)
            with other:
                assert other.get(f"{s.url}/api/me", headers=s.as_("bob")).status_code == 200
            time.sleep(3.0)  # past the header time-out: every idle socket has been closed
            closed = sum(1 for sock in idle if sock.recv(1) == b"") + (half.recv(1) == b"")
            assert closed == 206
            assert s.http.get("/api/me", headers=s.as_("alice")).status_code == 200
            # a body that stalls is refused when its time is up, and counted as a refused upload
            with socket.create_connection(("127.0.0.1", s.port), timeout=10) as slow:
                slow.sendall(
                    b"POST /api/submissions?mode=test&name=s.tar.gz HTTP/1.1\r\nHost: x\r\n"
                    + f"Authorization: Bearer {s.tokens['alice']}\r\nContent-Length: 1000\r\n\r\nabc".encode()
                )
                assert slow.recv(65536).startswith(b"HTTP/1.1 408")
            assert s.submit("alice").status_code == 202  # an honest upload still goes through
        finally:
            for sock in [*idle, half]:
                sock.close()
