"""Issue 52: a student of the course attacks the running service from this machine (127.0.0.1).

Each test runs one attack in a bounded loop against a real uvicorn (live_support) and checks
that it is refused, beside an honest request that must still succeed.
"""

from __future__ import annotations

import time
from pathlib import Path

from grader.course.service import store
from tests.grader.course.service.live_support import live
from tests.grader.course.service.service_support import settle


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
