"""Issue 52: a student of the course attacks the running service from this machine (127.0.0.1).

Each test runs one attack in a bounded loop against a real uvicorn (live_support) and checks
that it is refused, beside an honest request that must still succeed.
"""

from __future__ import annotations

from pathlib import Path

from tests.grader.course.service.live_support import live


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
