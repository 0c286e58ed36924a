"""`grader leaderboard`: choosing, ranking, flagging, pseudonyms, the site's files, and a real browser.

Results are built from the pydantic models (the contract), written as a batch would write them
(`<folder>/<student>/result.json`), and fed to the command as a course staff would.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.commands.leaderboard import add_parser, cmd_leaderboard
from grader.course import leaderboard
from grader.course.leaderboard.inputs import Entry, LeaderboardError, find_result_files
from grader.course.leaderboard.names import SALT_ENV, display_names, pseudonym
from grader.course.leaderboard.ranking import select
from grader.course.leaderboard.site import build_site
from grader.engine.records.model import (
    AssignmentRef,
    Performance,
    ProblemResult,
    Result,
    RunEnvironment,
    ShapeTiming,
    SubmissionRef,
    TestResult,
    geomean,
)

GPU = "NVIDIA H200"
CHROMIUM = Path("/usr/bin/chromium")
EMBEDDED = re.compile(r'<script type="application/json" id="leaderboard-data">(.*?)</script>', re.S)
PSEUDONYM = re.compile(r"^[a-z]+-[a-z]+-[0-9a-f]{4}$")


# ---------------------------------------------------------------------------------------------
# building results


def shape(
    name: str, student_ms: float, reference_ms: float, pytorch_ms: float | None = None, flags: list[str] | None = None
) -> ShapeTiming:
    return ShapeTiming(
        name=name,
        case=f"{name} [shape=[4096, 4096], dtype=float16]",
        student_ms=student_ms,
        reference_ms=reference_ms,
        pytorch_ms=pytorch_ms,
        ratio=round(reference_ms / student_ms, 4),
        achieved=round(100.0 / student_ms, 2),
        achieved_unit="GB/s",
        rounds=40,
        flags=flags or [],
    )


def problem(
    name: str,
    score: float,
    *,
    shapes: list[ShapeTiming] | None = None,
    kernel_check: str | None = None,
    max_score: float = 10.0,
) -> ProblemResult:
    """A problem result; with `shapes` its performance was measured (or flagged if a shape is)."""
    tests = [
        TestResult(name=f"{name}: case-a", status="passed" if score else "failed", score=score, max_score=max_score)
    ]
    if kernel_check:
        tests.append(
            TestResult(name=f"{name}: kernel check", status="failed", score=0, max_score=0, message=kernel_check)
        )
    if shapes is None:
        perf = Performance(status="not_measured", reason="no GPU", max_score=5.0)
    elif any(s.flags for s in shapes):
        perf = Performance(
            status="flagged",
            reason="; ".join(f for s in shapes for f in s.flags),
            score=0.0,
            max_score=5.0,
            gpu=GPU,
            shapes=shapes,
        )
    else:
        perf = Performance(
            status="measured",
            score=0.0,
            max_score=5.0,
            ratio_geomean=round(geomean([s.ratio for s in shapes]), 4),
            gpu=GPU,
            shapes=shapes,
        )
    return ProblemResult(
        name=name,
        title=name.upper(),
        score=score,
        max_score=max_score,
        status="passed" if score else "failed",
        tests=tests,
        performance=perf,
        kernel_check=kernel_check,
    )


def result(
    student: str | None,
    sha: str,
    problems: list[ProblemResult],
    *,
    graded_at: str = "2026-03-01T10:00:00+00:00",
    status: str = "graded",
    device: str = GPU,
    assignment: str = "triton-kernels",
) -> Result:
    return Result(
        assignment=AssignmentRef(name=assignment, version="2026.1"),
        submission=SubmissionRef(path=f"/submissions/{student}", sha256=sha * 8, student=student),
        environment=RunEnvironment(
            device=device, torch="2.13.0", triton="3.9.0", python="3.11.7", interpreter=device == "cpu"
        ),
        score=sum(p.score for p in problems),
        max_score=30.0,
        duration_s=12.0,
        graded_at=graded_at,
        status=status,  # type: ignore[arg-type]
        error="worker crashed" if status == "error" else "",
        problems=problems,
    )


def save(root: Path, folder: str, res: Result) -> Path:
    path = root / folder / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(res.model_dump_json(indent=2))
    return path


def gelu(score: float, student_ms: float, **kw: Any) -> ProblemResult:
    return problem(
        "gelu",
        score,
        shapes=[
            shape("big", student_ms, 1.0, pytorch_ms=1.6, **kw),
            shape("small", student_ms / 2, 0.5, pytorch_ms=0.6),
        ],
    )


@pytest.fixture
def grades(tmp_path: Path) -> Path:
    """Two weeks of batch output for one class (student ids all start with 'stud-')."""
    root = tmp_path / "grades"
    week1, week2 = "week1", "week2"
    # alice: a weaker first submission, then a better one
    save(root / week1, "stud-alice", result("stud-alice", "a1", [gelu(5, 2.0), problem("softmax", 5)]))
    save(
        root / week2,
        "stud-alice",
        result(
            "stud-alice", "a2", [gelu(10, 0.8), problem("softmax", 8, shapes=[shape("rows", 1.0, 0.9, pytorch_ms=2.0)])]
        ),
    )
    # bob: the same total as alice, slower: ranked after her
    save(
        root / week2,
        "stud-bob",
        result(
            "stud-bob", "b1", [gelu(10, 1.25), problem("softmax", 8, shapes=[shape("rows", 1.0, 0.9, pytorch_ms=2.0)])]
        ),
    )
    # carol: the same submission graded twice (a regrade): one row, the latest grading
    save(
        root / week1,
        "stud-carol",
        result("stud-carol", "c1", [gelu(10, 1.0), problem("softmax", 2)], graded_at="2026-03-01T09:00:00+00:00"),
    )
    save(
        root / week2,
        "stud-carol",
        result("stud-carol", "c1", [gelu(10, 1.0), problem("softmax", 2)], graded_at="2026-03-08T09:30:00+00:00"),
    )
    # dave: the top score, but timing below the roofline: flagged, not ranked
    save(
        root / week2,
        "stud-dave",
        result("stud-dave", "d1", [gelu(10, 0.01, flags=["median below the roofline floor"]), problem("softmax", 10)]),
    )
    # erin: called the PyTorch op: kernel check failed
    save(
        root / week2,
        "stud-erin",
        result("stud-erin", "e1", [problem("gelu", 0, kernel_check="called aten::gelu"), problem("softmax", 4)]),
    )
    # frank: grading itself failed
    save(root / week2, "stud-frank", result("stud-frank", "f1", [], status="error"))
    # gina: no student id in the record: the folder names her
    save(root / week2, "stud-gina", result(None, "g1", [gelu(3, 4.0), problem("softmax", 0)]))
    return root


def run(argv: list[str]) -> int:
    """`grader leaderboard ...` through this module's own parser registration."""
    parser = argparse.ArgumentParser(prog="grader")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["leaderboard", *argv])
    return args.func(args)


def read_site(site: Path) -> tuple[dict[str, Any], str]:
    return json.loads((site / "leaderboard.json").read_text()), (site / "index.html").read_text()


def names_of(rows: list[dict[str, Any]], kind: str = "student") -> list[str]:
    return [r["name"] for r in rows if r["kind"] == kind]


@pytest.fixture
def site(grades: Path, tmp_path: Path) -> Path:
    names = tmp_path / "names.csv"
    names.write_text(
        "student,display_name\nstud-alice,Alice\nstud-bob,Bob\nstud-carol,Carol\nstud-dave,Dave\nstud-erin,Erin\n"
    )
    out = tmp_path / "site"
    assert run([str(grades), "--out", str(out), "--names", str(names), "--title", "Kernels 2026"]) == 0
    return out


# ---------------------------------------------------------------------------------------------
# choosing and ranking


def test_best_submission_per_student_ranked_by_score_then_speedup(site: Path) -> None:
    data, _ = read_site(site)
    ranking = data["ranking"]
    students = [r for r in ranking if r["kind"] == "student"]
    assert [r["name"] for r in students] == ["Alice", "Bob", "Carol", names_of(students)[3]]
    assert [r["rank"] for r in students] == [1, 2, 3, 4]
    alice, bob = students[0], students[1]
    assert alice["score"] == bob["score"] == 18  # alice's second submission, not her first (10)
    assert alice["speedup"] > bob["speedup"]
    # overall speedup is the geomean of the per-problem speedups
    gelu_alice = geomean([1.0 / 0.8, 0.5 / 0.4])
    assert alice["speedup"] == pytest.approx(geomean([round(gelu_alice, 4), 0.9]), rel=1e-6)
    assert alice["problems"][0] == {"score": 10, "max_score": 10, "speedup": pytest.approx(gelu_alice, abs=1e-4)}


def test_regrade_of_the_same_submission_counts_once_as_its_latest_grading(site: Path) -> None:
    data, html = read_site(site)
    carol = [r for r in data["ranking"] if r["name"] == "Carol"]
    assert len(carol) == 1
    assert carol[0]["graded_at"] == "2026-03-08T09:30:00+00:00"
    assert "2026-03-08 09:30 UTC" in html


def test_same_file_named_twice_is_read_once(grades: Path, tmp_path: Path) -> None:
    alice = grades / "week2" / "stud-alice" / "result.json"
    data = build_site([alice, alice.parent, grades / "week2"], tmp_path / "site")
    assert names_of(data["ranking"]).count(pseudonym("stud-alice", "triton-kernels")) == 1


def test_flagged_entries_are_not_ranked_and_their_reasons_stay_off_the_public_page(site: Path) -> None:
    data, html = read_site(site)
    assert data["flagged"] == 2
    assert "Dave" not in names_of(data["ranking"]) and "Erin" not in names_of(data["ranking"])
    for text in (html, (site / "leaderboard.json").read_text()):
        assert "Dave" not in text and "Erin" not in text and "aten::gelu" not in text and "roofline" not in text
    for table in data["tables"]:
        assert not {"Dave", "Erin"} & set(names_of(table["rows"]))
    # the staff page, beside the site and not in it, names them with the reasons
    staff = json.loads((site.parent / "site-staff" / "staff.json").read_text())
    rows = {r["name"]: r for r in staff["rows"]}
    assert {"Dave", "Erin"} <= set(rows) and not rows["Dave"]["ranked"] and rows["Erin"]["student"] == "stud-erin"
    assert any("roofline" in f["detail"] for f in rows["Dave"]["flags"])
    assert rows["Erin"]["flags"][0] == {"kind": "kernel check failed", "problem": "gelu", "detail": "called aten::gelu"}
    staff_html = (site.parent / "site-staff" / "index.html").read_text()
    assert "Do not publish" in staff_html and "stud-erin" in staff_html and "called aten::gelu" in staff_html


def test_a_review_is_marked_publicly_and_explained_to_staff(tmp_path: Path) -> None:
    fast = gelu(10, 0.5)
    assert fast.performance is not None
    fast.performance.review = "big: speed ratio 2.0 is above the review bound 1.5"
    save(tmp_path / "grades", "stud-x", result("stud-x", "x1", [fast]))
    data = build_site([tmp_path / "grades"], tmp_path / "site", salt="s", staff_out=tmp_path / "staff")
    row = next(r for r in data["ranking"] if r["kind"] == "student")
    assert row["review"] is True and data["flagged"] == 0  # ranked: the points stand
    html = (tmp_path / "site" / "index.html").read_text()
    assert 'class="badge review"' in html and "ratio 2.0" not in html
    staff = json.loads((tmp_path / "staff" / "staff.json").read_text())
    assert staff["rows"][0]["ranked"] and staff["rows"][0]["flags"][0]["kind"] == "review"


def test_the_staff_page_cannot_go_inside_the_site(grades: Path, tmp_path: Path) -> None:
    with pytest.raises(LeaderboardError, match="must not be inside"):
        build_site([grades], tmp_path / "site", staff_out=tmp_path / "site" / "staff")


def test_a_clean_submission_is_ranked_even_after_a_flagged_one(tmp_path: Path) -> None:
    root = tmp_path / "grades"
    save(root / "w1", "stud-x", result("stud-x", "x1", [gelu(10, 0.01, flags=["too fast"])]))
    save(root / "w2", "stud-x", result("stud-x", "x2", [gelu(6, 1.0)]))
    data = build_site([root], tmp_path / "site", salt="s")
    assert [r["score"] for r in data["ranking"] if r["kind"] == "student"] == [6]
    assert data["flagged"] == 0


def test_errors_are_not_ranked_and_folder_names_the_student(site: Path) -> None:
    data, html = read_site(site)
    frank = pseudonym("stud-frank", "triton-kernels")
    gina = pseudonym("stud-gina", "triton-kernels")
    assert data["not_graded"] == 1 and frank not in html  # a count on the public page
    assert frank not in names_of(data["ranking"])
    assert gina in names_of(data["ranking"])
    staff = json.loads((site.parent / "site-staff" / "staff.json").read_text())
    assert staff["not_graded"] == [{"student": "stud-frank", "name": frank}]


def test_hidden_folders_are_not_searched(grades: Path, tmp_path: Path) -> None:
    save(grades / ".trash", "stud-old", result("stud-old", "o", [gelu(10, 0.1)]))
    files = find_result_files([grades])
    assert len(files) == 9 and not any(".trash" in str(f) for f in files)


def test_select_breaks_exact_ties_by_latest_grading(tmp_path: Path) -> None:
    old = Entry(tmp_path / "a", result("s", "1", [gelu(5, 1.0)], graded_at="2026-01-01T00:00:00Z"), "s")
    new = Entry(tmp_path / "b", result("s", "2", [gelu(5, 1.0)], graded_at="2026-02-01T00:00:00Z"), "s")
    chosen = select([new, old], warn=lambda m: None)
    assert chosen.ranked == [new]


def test_a_failed_regrade_does_not_hide_a_graded_run(tmp_path: Path) -> None:
    good = Entry(tmp_path / "a", result("s", "1", [gelu(5, 1.0)], graded_at="2026-01-01T00:00:00Z"), "s")
    crash = Entry(tmp_path / "b", result("s", "1", [], status="error", graded_at="2026-02-01T00:00:00Z"), "s")
    assert select([good, crash], warn=lambda m: None).ranked == [good]


def test_identical_submissions_of_two_students_are_reported(tmp_path: Path) -> None:
    warnings: list[str] = []
    a = Entry(tmp_path / "a", result("stud-a", "z", [gelu(5, 1.0)]), "stud-a")
    b = Entry(tmp_path / "b", result("stud-b", "z", [gelu(5, 1.0)]), "stud-b")
    chosen = select([a, b], warn=warnings.append)
    assert len(chosen.ranked) == 2
    assert warnings and "stud-a, stud-b" in warnings[0]


def test_ties_share_a_rank(tmp_path: Path) -> None:
    root = tmp_path / "grades"
    for name in ("stud-p", "stud-q"):
        save(root, name, result(name, name[-1], [problem("gelu", 7)], device="cpu"))
    save(root, "stud-r", result("stud-r", "r", [problem("gelu", 3)], device="cpu"))
    data = build_site([root], tmp_path / "site")
    assert [r["rank"] for r in data["ranking"]] == [1, 1, 3]


# ---------------------------------------------------------------------------------------------
# per-problem tables, marked rows, charts


def test_problem_table_has_shapes_reference_and_pytorch_rows(site: Path) -> None:
    data, html = read_site(site)
    gelu_table = next(t for t in data["tables"] if t["name"] == "gelu")
    assert [s["name"] for s in gelu_table["shapes"]] == ["big", "small"]
    assert gelu_table["shapes"][0]["unit"] == "GB/s"
    kinds = [r["kind"] for r in gelu_table["rows"]]
    assert kinds.count("reference") == 1 and kinds.count("pytorch") == 1
    ref = next(r for r in gelu_table["rows"] if r["kind"] == "reference")
    torch = next(r for r in gelu_table["rows"] if r["kind"] == "pytorch")
    assert ref["speedup"] == 1.0 and ref["shapes"][0]["ms"] == 1.0 and ref["shapes"][0]["speedup"] == 1.0
    assert torch["shapes"][0] == {
        "ms": 1.6,
        "speedup": pytest.approx(1 / 1.6),
        "achieved": pytest.approx(100 / 1.6, rel=1e-3),
    }
    # measured rows sorted by speedup, the marked rows among them; unmeasured ones last
    speedups = [r["speedup"] for r in gelu_table["rows"] if r["speedup"] is not None]
    assert speedups == sorted(speedups, reverse=True)
    alice = next(r for r in gelu_table["rows"] if r["name"] == "Alice")
    assert alice["rank"] == 1 and alice["shapes"][0] == {"ms": 0.8, "speedup": 1.25, "achieved": 125.0}
    section = html[html.index('id="problem-gelu"') : html.index('id="problem-softmax"')]
    assert 'class="reference"' in section and 'class="pytorch"' in section
    assert "<svg" in section and section.count("<rect") == len(speedups)
    assert "×1 = staff reference" in section


def test_unmeasured_problem_rows_say_so(site: Path) -> None:
    data, _ = read_site(site)
    softmax = next(t for t in data["tables"] if t["name"] == "softmax")
    carol = next(r for r in softmax["rows"] if r["name"] == "Carol")
    assert carol["speedup"] is None and carol["performance"] == "not measured"
    assert softmax["rows"][-1]["speedup"] is None
    # ranked by speedup where measured, then by the problem's score
    ranks = [(r["name"], r["rank"]) for r in softmax["rows"] if r["kind"] == "student"]
    assert ranks[:3] == [("Alice", 1), ("Bob", 1), ("Carol", 3)] and ranks[3][1] == 4


def test_cpu_grading_shows_not_measured_and_ranks_by_score(tmp_path: Path) -> None:
    root = tmp_path / "grades"
    save(root, "stud-a", result("stud-a", "a", [problem("gelu", 4)], device="cpu"))
    save(root, "stud-b", result("stud-b", "b", [problem("gelu", 9)], device="cpu"))
    data = build_site([root], tmp_path / "site", names_file=None, salt="x")
    html = (tmp_path / "site" / "index.html").read_text()
    assert data["measured"] is False
    assert [r["score"] for r in data["ranking"]] == [9, 4]
    assert all(r["kind"] == "student" and r["speedup"] is None for r in data["ranking"])
    assert data["tables"][0]["shapes"] == [] and not data["tables"][0]["measured"]
    assert [(r["score"], r["rank"]) for r in data["tables"][0]["rows"]] == [(9, 1), (4, 2)]
    assert 'id="not-measured"' in html and html.count("not measured") >= 4
    assert "<svg" not in html


def test_several_gpus_get_one_reference_row_each(tmp_path: Path) -> None:
    root = tmp_path / "grades"
    save(root, "stud-a", result("stud-a", "a", [gelu(10, 1.0)]))
    other = gelu(10, 1.0).model_copy(deep=True)
    other.performance.gpu = "NVIDIA A100"  # type: ignore[union-attr]
    save(root, "stud-b", result("stud-b", "b", [other], device="NVIDIA A100"))
    data = build_site([root], tmp_path / "site")
    refs = names_of(data["tables"][0]["rows"], "reference")
    assert refs == ["staff reference (NVIDIA A100)", "staff reference (NVIDIA H200)"]


# ---------------------------------------------------------------------------------------------
# names


def test_without_a_salt_the_command_warns(
    grades: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README says anyone with a class list can redo unsalted pseudonyms; the command says so too."""
    monkeypatch.delenv(SALT_ENV, raising=False)
    assert run([str(grades), "--out", str(tmp_path / "plain")]) == 0
    assert f"no --salt and no ${SALT_ENV}" in " ".join(capsys.readouterr().err.split())
    monkeypatch.setenv(SALT_ENV, "a private course key")
    assert run([str(grades), "--out", str(tmp_path / "salted")]) == 0
    assert "no --salt" not in capsys.readouterr().err


def test_pseudonyms_are_stable_salted_and_hide_the_ids(grades: Path, tmp_path: Path) -> None:
    a = build_site([grades], tmp_path / "a")
    b = build_site([grades], tmp_path / "b")
    c = build_site([grades], tmp_path / "c", salt="a private course key")
    staff = json.loads((tmp_path / "a-staff" / "staff.json").read_text())
    shown = (
        names_of(a["ranking"])
        + [r["name"] for r in staff["rows"] if not r["ranked"]]
        + [r["name"] for r in staff["not_graded"]]
    )
    assert len(shown) == 7 and len(set(shown)) == 7
    assert all(PSEUDONYM.match(name) for name in shown)
    assert names_of(a["ranking"]) == names_of(b["ranking"])
    assert not set(names_of(a["ranking"])) & set(names_of(c["ranking"]))
    for folder in ("a", "c"):
        for name in ("index.html", "leaderboard.json"):
            text = (tmp_path / folder / name).read_text()
            assert "stud-" not in text and "/submissions/" not in text and "a1a1a1a1" not in text


def test_pseudonym_collisions_get_longer_suffixes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        leaderboard.names,
        "pseudonym",
        lambda student, salt, digits=4: f"same-{student[-1] * digits}" if digits > 4 else "same-name",
    )
    shown = display_names(["s1", "s2", "s3"], "salt", {"s3": "Named"})
    assert shown == {"s1": "same-11111111", "s2": "same-22222222", "s3": "Named"}


def test_names_file_as_json(grades: Path, tmp_path: Path) -> None:
    names = tmp_path / "names.json"
    names.write_text(json.dumps({"stud-alice": "Alice A.", "stud-bob": "<b>Bob</b>"}))
    data = build_site([grades], tmp_path / "site", names_file=names)
    assert names_of(data["ranking"])[:2] == ["Alice A.", "<b>Bob</b>"]
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<b>Bob</b>" not in html and "&lt;b&gt;Bob&lt;/b&gt;" in html


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("names.csv", "student,display_name\nstud-alice\n", "names.csv:2: expected 'student,display_name'"),
        ("names.json", "{not json", "names.json: not valid JSON"),
        ("names.json", '["stud-alice"]', "names.json: expected a JSON object"),
    ],
)
def test_bad_names_file_exits_2_naming_it(
    grades: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    names = tmp_path / name
    names.write_text(text)
    assert run([str(grades), "--out", str(tmp_path / "site"), "--names", str(names)]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "site").exists()


# ---------------------------------------------------------------------------------------------
# the site's files


def test_page_embeds_exactly_leaderboard_json(site: Path) -> None:
    data, html = read_site(site)
    embedded = EMBEDDED.search(html)
    assert embedded is not None
    assert json.loads(embedded.group(1)) == data
    assert data["title"] == "Kernels 2026" and "<title>Kernels 2026</title>" in html
    assert data["assignment"] == {"name": "triton-kernels", "versions": ["2026.1"]}
    assert data["built_at"] in html and 'id="version">2026.1<' in html
    assert sorted(p.name for p in site.iterdir()) == ["index.html", "leaderboard.json"]


def test_page_is_self_contained(site: Path) -> None:
    _, html = read_site(site)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html
    assert re.findall(r"<link[^>]*>", html) == ['<link rel="icon" href="data:,">']  # no favicon request
    assert re.findall(r'href="([^"#][^"]*)"', html) == ["data:,", "leaderboard.json"]


def test_embedded_json_cannot_break_out_of_its_script(grades: Path, tmp_path: Path) -> None:
    names = tmp_path / "names.json"
    evil = "</script><script>alert(1)</script><!--"
    names.write_text(json.dumps({"stud-alice": evil}))
    data = build_site([grades], tmp_path / "site", names_file=names)
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<script>alert(1)" not in html
    embedded = EMBEDDED.search(html)
    assert embedded is not None and json.loads(embedded.group(1)) == data
    assert names_of(data["ranking"])[0] == evil


def test_rebuild_with_source_date_epoch_is_identical(
    grades: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    build_site([grades], tmp_path / "a")
    data = build_site([grades], tmp_path / "b")
    assert data["built_at"] == "2026-01-01T00:00:00+00:00"
    for name in ("index.html", "leaderboard.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


# ---------------------------------------------------------------------------------------------
# bad input


def test_malformed_result_is_skipped_with_a_warning_naming_it(
    grades: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = grades / "week2" / "stud-zed" / "result.json"
    broken.parent.mkdir()
    broken.write_text('{"schema_version": 1, "score": "lots"')
    wrong = grades / "week2" / "stud-yan" / "result.json"
    wrong.parent.mkdir()
    wrong.write_text(json.dumps({"score": 3}))
    assert run([str(grades), "--out", str(tmp_path / "site")]) == 0
    err = capsys.readouterr().err
    assert f"skipped {broken}" in err and f"skipped {wrong}" in err
    data, _ = read_site(tmp_path / "site")
    assert len(names_of(data["ranking"])) == 4


def test_no_valid_results_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "grades" / "stud-a" / "result.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("not json")
    assert run([str(tmp_path / "grades"), "--out", str(tmp_path / "site")]) == 2
    err = capsys.readouterr().err
    assert f"skipped {bad}" in err and "no valid result.json" in err
    assert not (tmp_path / "site").exists()


def test_missing_or_empty_inputs_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([str(tmp_path / "nowhere"), "--out", str(tmp_path / "site")]) == 2
    assert f"{tmp_path / 'nowhere'}: no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert run([str(tmp_path / "empty"), "--out", str(tmp_path / "site")]) == 2
    assert f"no result.json found under {tmp_path / 'empty'}" in capsys.readouterr().err


def test_out_that_is_a_file_exits_2(grades: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "site"
    out.write_text("x")
    assert run([str(grades), "--out", str(out)]) == 2
    assert f"{out}: exists and is not a folder" in capsys.readouterr().err


def test_results_of_two_assignments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save(tmp_path / "g", "stud-a", result("stud-a", "a", [problem("gelu", 1)], assignment="kernels-a"))
    save(tmp_path / "g", "stud-b", result("stud-b", "b", [problem("gelu", 1)], assignment="kernels-b"))
    assert run([str(tmp_path / "g"), "--out", str(tmp_path / "site")]) == 2
    assert "several assignments (kernels-a, kernels-b)" in capsys.readouterr().err


def test_cli_registers_the_command() -> None:
    from grader.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    if "leaderboard" not in commands:
        pytest.skip("grader/cli.py does not register the leaderboard command yet")
    args = parser.parse_args(["leaderboard", "grades", "--out", "site"])
    assert args.func is cmd_leaderboard


# ---------------------------------------------------------------------------------------------
# a real browser


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (a random port), as a web server would publish it."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _column(page: Any, table: str, css: str) -> list[str]:
    return page.locator(f"#{table} tbody tr td{css}").all_inner_texts()


@pytest.mark.browser
def test_site_in_headless_chromium(served: str, site: Path, tmp_path: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip("/usr/bin/chromium is missing (scripts/setup-browser.sh installs it as root)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    data, _ = read_site(site)
    expected = [r["name"] for r in data["ranking"]]
    args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=args, timeout=20_000)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(5_000)
            requests: list[str] = []
            errors: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(served, wait_until="load")

            assert page.title() == "Kernels 2026"
            assert page.evaluate("window.leaderboardData") == data
            names = _column(page, "ranking-table", ".name .label")
            assert names == expected
            assert names[:3] == ["Alice", "Bob", "Carol"] and names[-2:] == ["staff reference", "PyTorch"]
            assert _column(page, "ranking-table", ".rank")[:4] == ["1", "2", "3", "4"]
            assert page.locator("#ranking-table tr.reference .badge").inner_text() == "baseline"
            assert page.locator("#flagged-count").inner_text().startswith("2 submission(s)")
            assert page.locator("#chart-gelu rect").count() > 0

            header = page.locator("#ranking-table thead th", has_text="name")
            header.click()
            assert header.get_attribute("aria-sort") == "ascending"
            by_name = sorted(expected, key=str.lower)
            assert _column(page, "ranking-table", ".name .label") == by_name
            header.click()
            assert header.get_attribute("aria-sort") == "descending"
            assert _column(page, "ranking-table", ".name .label") == by_name[::-1]

            # a numeric column: fastest first, rows without a number (not measured) stay last
            page.locator(
                "#table-gelu thead tr:last-child th", has_text="speedup"
            ).click()  # was descending: now ascending
            speedups = [float(t.lstrip("×")) for t in _column(page, "table-gelu", ".speedup") if t.startswith("×")]
            assert speedups == sorted(speedups)

            shot = tmp_path / "leaderboard.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert errors == []
            assert all(url.startswith(served) for url in requests), requests
        finally:
            browser.close()
