"""The service's HTTP rules, every endpoint: whose token reads what, what is refused and why.

Gradings here are stand-ins (service_support.fake_grade); tests/grader/course/service/test_serve.py
runs the real `grader serve` and `grader submit`.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from grader.course.service import store, tokens
from grader.engine.spec.model import Service
from tests.grader.course.service.service_support import archive, cookie, service

STUDENT_ENDPOINTS = [
    ("GET", "/api/submissions"),
    ("GET", "/api/submissions/1"),
    ("GET", "/api/submissions/1/report"),
    ("GET", "/api/me"),
    ("POST", "/api/submissions"),
]
STAFF_ENDPOINTS = [
    ("GET", "/api/staff/queue"),
    ("POST", "/api/staff/rerun-top?n=1"),
    ("POST", "/api/staff/jobs/1/rerun"),
    ("POST", "/api/staff/publish"),
]


def test_a_submission_is_queued_graded_and_listed(tmp_path: Path, database: str) -> None:
    with service(tmp_path, database=database) as s:
        made = s.submit("alice")
        assert made.status_code == 202, made.text
        view = s.wait("alice", made.json()["id"])
        assert view["state"] == "graded" and view["result"]["score"] == 10.0
        listing = s.client.get("/api/submissions", headers=s.as_("alice")).json()
        assert [r["id"] for r in listing["submissions"]] == [view["id"]]
        assert listing["quota"]["test"]["per_hour"] == 5
        report = s.client.get(f"/api/submissions/{view['id']}/report", headers=s.as_("alice"))
        assert report.status_code == 200 and "<html" in report.text


@pytest.mark.parametrize(("method", "path"), STUDENT_ENDPOINTS + STAFF_ENDPOINTS)
def test_every_endpoint_needs_a_valid_token(tmp_path: Path, method: str, path: str) -> None:
    with service(tmp_path) as s:
        s.submit("alice")
        for headers in ({}, {"Authorization": "Bearer gks_wrong"}, {"Authorization": s.tokens["alice"]}):
            answer = s.client.request(method, path, headers=headers)
            assert answer.status_code == 401, (headers, answer.text)
            assert "token" in answer.json()["error"]


@pytest.mark.parametrize(("method", "path"), STAFF_ENDPOINTS)
def test_staff_endpoints_refuse_a_students_token(tmp_path: Path, method: str, path: str) -> None:
    with service(tmp_path) as s:
        s.wait("alice", s.submit("alice").json()["id"])
        answer = s.client.request(method, path, headers=s.as_("alice"))
        assert answer.status_code == 403 and answer.json()["error"] == "staff only"
        assert s.client.request(method, path, headers=s.as_("ta")).status_code in (200, 202)


@pytest.mark.parametrize("path", ["/api/submissions/{id}", "/api/submissions/{id}/report"])
def test_a_student_never_reads_anothers_submission(tmp_path: Path, path: str) -> None:
    with service(tmp_path) as s:
        job = s.wait("alice", s.submit("alice").json()["id"])["id"]
        answer = s.client.get(path.format(id=job), headers=s.as_("bob"))
        assert answer.status_code == 404 and answer.json()["error"] == f"no submission {job} of yours"
        # the same answer as a job that does not exist: ids cannot be probed
        assert s.client.get(path.format(id=999), headers=s.as_("bob")).json()["error"] == "no submission 999 of yours"
        assert s.client.get("/api/submissions", headers=s.as_("bob")).json()["submissions"] == []
        assert s.client.get(f"/me/submissions/{job}", headers=cookie(s, "bob")).status_code == 404
        own = s.client.get(f"/me/submissions/{job}", headers=cookie(s, "alice")).text
        assert 'href="/me"' in own  # the report leads back to the submissions it was opened from


def test_a_revoked_token_stops_working(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        assert s.client.get("/api/me", headers=s.as_("bob")).status_code == 200
        assert tokens.revoke(s.server.engine, "bob")
        assert s.client.get("/api/me", headers=s.as_("bob")).status_code == 401


def test_uploads_get_the_batchs_archive_rules(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        slip = s.submit("alice", data=archive({"../gelu.py": "x = 1\n"}))
        assert slip.status_code == 422 and "'..' in its path" in slip.json()["error"]
        junk = s.submit("alice", data=b"not an archive at all")
        assert junk.status_code == 422 and junk.json()["error"].startswith("bad archive:")
        rar = s.submit("alice", name="work.rar")
        assert rar.status_code == 400 and "not a supported archive" in rar.json()["error"]
        assert s.client.get("/api/submissions", headers=s.as_("alice")).json()["submissions"] == []  # nothing charged


def test_request_sizes_are_bounded(tmp_path: Path) -> None:
    with service(tmp_path, Service(max_upload_bytes=1000)) as s:
        big = s.submit("alice", data=b"\0" * 5000)
        assert big.status_code == 413 and "larger than 1000 bytes" in big.json()["error"]
        login = s.client.post("/login", content=b"token=" + b"x" * 20_000)
        assert login.status_code == 413


def test_a_refusal_says_which_limit_and_when_it_resets(tmp_path: Path) -> None:
    with service(tmp_path, quota=1) as s:
        first = s.submit("alice")
        assert first.status_code == 202
        again = s.submit("alice")
        body = again.json()
        assert again.status_code == 429 and body["limit"] == "test per hour"
        assert body["error"].startswith("quota: 1 test submission(s) per hour, all used; the next one at ")
        resets = datetime.fromisoformat(body["resets_at"]).timestamp()
        assert 3590 < resets - time.time() <= 3600
        assert s.submit("alice", mode="final").status_code == 202  # each mode has its own
        assert s.submit("bob").status_code == 202  # and each student


def test_requests_per_minute_are_bounded(tmp_path: Path) -> None:
    with service(tmp_path, rate=3) as s:
        codes = [s.client.get("/api/me", headers=s.as_("alice")).status_code for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = s.client.get("/api/me", headers=s.as_("alice"))
        assert int(limited.headers["retry-after"]) >= 1
        assert s.client.get("/api/me", headers=s.as_("bob")).status_code == 200  # counted per client


def test_gpu_modes_say_they_need_a_gpu_on_a_cpu_server(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        for mode in ("benchmark", "profile"):
            answer = s.submit("alice", mode=mode)
            assert answer.status_code == 409 and "needs a GPU" in answer.json()["error"]
        assert s.submit("alice", mode="bogus").status_code == 400
        assert "unknown problem" in s.submit("alice", problems="gelu,nope").json()["error"]
    with service(tmp_path / "gpu", device="cuda") as s:
        assert s.submit("alice", mode="benchmark").status_code == 202
        assert s.submit("alice", mode="profile").status_code == 202  # a GPU server profiles


def test_a_final_result_waits_for_publication_and_never_shows_worker_output(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        job = s.wait("alice", s.submit("alice", mode="final").json()["id"])
        assert job["state"] == "received" and job["result"] is None and "staff publish" in job["withheld"]
        report = s.client.get(f"/api/submissions/{job['id']}/report", headers=s.as_("alice"))
        assert report.status_code == 404 and "HIDDEN-SHAPE" not in report.text
        page = s.client.get("/me", headers=cookie(s, "alice"))
        assert "HIDDEN-SHAPE" not in page.text and "staff publish" in page.text
        assert s.client.get("/api/leaderboard").json()["rows"] == []
        assert s.client.post("/api/staff/publish", headers=s.as_("ta")).status_code == 200
        shown = s.client.get(f"/api/submissions/{job['id']}", headers=s.as_("alice")).json()
        assert shown["result"]["score"] == 10.0 and "HIDDEN-SHAPE" not in str(shown)
        assert len(s.client.get("/api/leaderboard").json()["rows"]) == 1


def test_the_deadline_closes_finals_and_opens_their_results(tmp_path: Path) -> None:
    past = datetime.now(timezone.utc) - timedelta(hours=1)
    with service(tmp_path, Service(deadline=past)) as s:
        late = s.submit("alice", mode="final")
        assert late.status_code == 403 and late.json()["limit"] == "deadline"
        assert s.submit("alice").status_code == 202  # test stays open
    with service(tmp_path / "accept", Service(deadline=past, late="accept")) as s:
        view = s.wait("alice", s.submit("alice", mode="final").json()["id"])
        assert view["late"] and view["result"]["score"] == 10.0  # past the deadline: visible


def test_staff_rerun_the_top_under_a_new_secret_side_by_side(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        s.wait("alice", s.submit("alice", mode="final").json()["id"])
        s.client.post("/api/staff/publish", headers=s.as_("ta"))
        made = s.client.post("/api/staff/rerun-top?n=5", headers=s.as_("ta")).json()["rerun"]
        assert len(made) == 1
        rerun = store.get(s.server.engine, made[0])
        assert rerun is not None and rerun.rerun_of == 1 and rerun.secret and len(rerun.secret) == 64
        deadline = time.monotonic() + 20
        while (store.get(s.server.engine, made[0]) or rerun).state != "graded" and time.monotonic() < deadline:
            time.sleep(0.05)
        rows = s.client.get("/api/staff/queue", headers=s.as_("ta")).json()["reruns"]
        assert rows[0]["score_before"] == rows[0]["score_after"] == 10.0
        # a staff re-run is not the student's: not listed, not counted, not readable
        listing = s.client.get("/api/submissions", headers=s.as_("alice")).json()
        assert [r["id"] for r in listing["submissions"]] == [1] and listing["quota"]["final"]["per_hour"] == 1
        assert s.client.get(f"/api/submissions/{made[0]}", headers=s.as_("alice")).status_code == 404


def test_a_form_posted_from_another_site_is_refused(tmp_path: Path) -> None:
    with service(tmp_path) as s:
        evil = s.client.post("/staff/publish", headers={**cookie(s, "ta"), "origin": "https://evil.example"})
        assert evil.status_code == 403 and store.published_at(s.server.engine) is None
        s.client.post("/staff/publish", headers=cookie(s, "ta"), follow_redirects=False)
        assert store.published_at(s.server.engine) is not None
        student = s.client.post("/staff/publish", headers=cookie(s, "alice"))
        assert student.status_code == 403


def test_an_empty_leaderboard_says_where_places_come_from(tmp_path: Path) -> None:
    """Issue 53: a CPU server takes no benchmark submission, so its page must not promise a ranking
    that only the final grading can give; a GPU server's page says what a place comes from."""
    with service(tmp_path / "cpu") as s:
        text = s.client.get("/leaderboard").text
        assert "Nobody is ranked yet" in text and "grades on a CPU" in text and "final grades are published" in text
    with service(tmp_path / "gpu", device="cuda") as s:
        text = s.client.get("/leaderboard").text
        assert "best benchmark submission" in text and "grades on a CPU" not in text
