"""`grader batch` without Docker: discovery, ids, resumability, error rows, the gradebook."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import shutil
import tarfile
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest

from grader import cli
from grader.commands.batch import options_from_args
from grader.course.batch import run as batch_run
from grader.course.batch.discovery import WORK, Entry, discover, read_gradescope_metadata, student_id
from grader.course.batch.errors import BatchError
from grader.course.batch.options import PER_PROBLEM_ALLOWANCE_S, STARTUP_ALLOWANCE_S
from grader.course.batch.results import BadResult, collect_result
from grader.course.batch.run import BatchLock, run_batch
from grader.course.batch.tasks import Task
from grader.engine.assignment.load import load_assignment
from grader.engine.records.files import submission_hash
from grader.engine.records.model import AssignmentRef, ProblemResult, Result, RunEnvironment, SubmissionRef

ROOT = Path(__file__).resolve().parents[4]
CORRECT = ROOT / "examples" / "submissions" / "correct"


def parse(*argv: str) -> argparse.Namespace:
    return cli.build_parser().parse_args(list(argv))


def run(subs: Path, out: Path, *extra: str) -> int:
    args = parse("batch", str(subs), "--out", str(out), "--device", "cpu", "--problems", "gelu", *extra)
    return run_batch(options_from_args(args))


def gradebook(out: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(io.StringIO((out / "gradebook.csv").read_text()))
    return {r["student"]: r for r in rows}


def fake_result(assignment: Any, submission: Path, student: str, problems: tuple[str, ...] | None) -> Result:
    """The record a `grader grade` of `submission` would write, every problem passed (no kernel runs)."""
    chosen = [p for p in assignment.problems if not problems or p.name in problems]
    return Result(
        assignment=AssignmentRef(name=assignment.assignment.name, version=assignment.assignment.version),
        submission=SubmissionRef(path=str(submission), sha256=submission_hash(submission), student=student),
        environment=RunEnvironment(device="cpu", torch="t", triton="t", python="3", interpreter=True),
        score=sum(p.points.correctness for p in chosen),
        max_score=sum(p.max_score for p in chosen),
        duration_s=0.01,
        graded_at="2026-01-01T00:00:00+00:00",
        problems=[
            ProblemResult(name=p.name, score=p.points.correctness, max_score=p.max_score, status="passed")
            for p in chosen
        ],
    )


class FakeGrade:
    """Stands in for the batch's runner (a `grader grade` child per student): records who was
    graded; can fail for chosen students, as a crashed child or a Ctrl-C would."""

    parallel = False

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, BaseException] = {}
        self.ctx: Any = None
        self.slots: list[str | None] = [None]

    def run(self, task: Task, slot: str | None) -> Result:
        self.calls.append(task.student)
        failure = self.fail.get(task.student)
        if isinstance(failure, Exception):  # what SubprocessRunner makes of a child that crashed
            return self.ctx.infra_error(task, f"`grader grade` exited with code 1:\n{failure!r}", "process")
        if failure is not None:
            raise failure
        # the child's record, read back as SubprocessRunner reads it
        written = fake_result(self.ctx.assignment, task.folder, task.student, self.ctx.command.problems)
        (task.work / "out").mkdir(parents=True, exist_ok=True)
        (task.work / "out" / "result.json").write_text(written.model_dump_json())
        return collect_result(task.work / "out", task, self.ctx.assignment)

    def stop(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeGrade:
    grade = FakeGrade()

    def make_runner(ctx: Any, options: Any, console: Any, cluster: Any = None) -> tuple[FakeGrade, dict[str, Any]]:
        grade.ctx = ctx
        return grade, {"mode": "subprocess", "gpus": [], "jobs": 1}

    monkeypatch.setattr(batch_run, "make_runner", make_runner)
    return grade


def student_folder(parent: Path, name: str, source: str = "x = 1\n") -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / "gelu.py").write_text(source)
    return folder


def zip_of(path: Path, files: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


# -- discovery and ids ------------------------------------------------------------------------------


def test_discover_folders_archives_and_manifest(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "alice")
    zip_of(subs / "bob.zip", {"bob/gelu.py": b"x"})
    with tarfile.open(subs / "carol.tar.gz", "w:gz"):
        pass
    (subs / "notes.txt").write_text("not a submission")
    (subs / ".hidden").mkdir()
    (subs / "dave.rar").write_bytes(b"Rar!")
    (subs / "manifest.csv").write_text("entry,student_id\nbob.zip,bob42\ncarol,c-77\n")
    entries = {e.student: e for e in discover(subs)}
    assert sorted(entries) == ["alice", "bob42", "c-77", "dave"]
    assert entries["alice"].kind == "folder"
    assert entries["bob42"].kind == "archive" and entries["bob42"].source.name == "bob.zip"
    assert entries["c-77"].source.name == "carol.tar.gz"
    assert entries["dave"].kind == "invalid" and "unsupported archive" in entries["dave"].error


def test_manifest_json_and_headerless_csv(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "a1")
    (subs / "manifest.json").write_text(json.dumps({"a1": "alice@uni.edu"}))
    assert [e.student for e in discover(subs)] == ["alice@uni.edu"]
    (subs / "manifest.json").unlink()
    (subs / "manifest.csv").write_text("a1,s-001\n")
    assert [e.student for e in discover(subs)] == ["s-001"]
    (subs / "manifest.csv").write_text("entry,student\na1\n")
    with pytest.raises(BatchError, match="line 2"):
        discover(subs)


def test_bad_manifest_json_names_the_file(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "manifest.json").write_text("[1, 2]")
    with pytest.raises(BatchError, match="manifest.json"):
        discover(subs)


def test_gradescope_export(tmp_path: Path) -> None:
    subs = tmp_path / "export"
    student_folder(subs, "submission_101")
    student_folder(subs, "submission_102")
    student_folder(subs, "submission_103")
    (subs / "submission_metadata.yml").write_text(
        "submission_101:\n"
        "  :submitters:\n"
        "  - :name: Alice Liddell\n"
        "    :sid: '1234'\n"
        "    :email: alice@uni.edu\n"
        "  :created_at: 2026-01-01\n"
        "submission_102:\n"
        "  :submitters:\n"
        "  - :name: Bob\n"
        "    :email: bob@uni.edu\n"
        "  - :name: Carol\n"
        "    :sid: '99'\n"
    )
    assert read_gradescope_metadata(subs / "submission_metadata.yml") == {
        "submission_101": "1234",
        "submission_102": "bob+99",
    }
    assert [(e.student, e.source.name) for e in discover(subs)] == [
        ("1234", "submission_101"),
        ("bob+99", "submission_102"),
        ("submission_103", "submission_103"),
    ]


def test_an_id_claimed_twice_is_an_error_row_for_every_claimant(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "alice")
    zip_of(subs / "alice.zip", {"gelu.py": b"x"})
    student_folder(subs, "bob")
    entries = discover(subs)
    assert [e.student for e in entries] == ["alice", "alice-dup2", "bob"]
    for entry in entries[:2]:  # neither alice.zip nor the folder alice takes the row first-come
        assert entry.kind == "invalid" and "duplicate student id 'alice'" in entry.error
        assert entry.claimed == ("alice", ("alice", "alice.zip"))
    assert entries[2].kind == "folder" and entries[2].claimed is None  # the honest twin


EXPORT_METADATA = (
    "submission_101:\n  :submitters:\n  - :name: Alice\n    :sid: '{a}'\n"
    "submission_102:\n  :submitters:\n  - :name: Bob\n    :sid: '{b}'\n"
)


def test_a_students_folder_cannot_pose_as_an_export_of_other_students(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "alice")
    student_folder(subs, "bob")
    mallory = student_folder(subs, "mallory")
    for victim in ("submission_101", "submission_102"):
        student_folder(mallory, victim)
    (mallory / "submission_metadata.yml").write_text(EXPORT_METADATA.format(a="alice", b="bob"))
    entries = discover(subs)
    assert [(e.student, e.kind, e.source.name) for e in entries] == [
        ("alice", "folder", "alice"),
        ("bob", "folder", "bob"),
        ("mallory", "folder", "mallory"),
    ]
    # the honest twin: staff who pass --nested-exports get the sections of a course's export
    course = tmp_path / "course"
    section = student_folder(course, "section-a")
    for folder in ("submission_101", "submission_102"):
        student_folder(section, folder)
    (section / "submission_metadata.yml").write_text(EXPORT_METADATA.format(a="1234", b="5678"))
    assert [e.student for e in discover(course, nested_exports=True)] == ["1234", "5678"]
    assert [e.student for e in discover(course)] == ["section-a"]


def test_metadata_with_aliases_or_past_its_size_gives_no_ids_and_no_blow_up(tmp_path: Path) -> None:
    subs = tmp_path / "export"
    student_folder(subs, "submission_101")
    # a billion laughs: 9 levels of 9 aliases, 541 bytes, hundreds of MB once expanded
    bomb = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n'
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [" + ",".join([f"*{previous}"] * 9) + "]\n"
    bomb += "submission_101:\n  :submitters:\n  - :sid: *i\n"
    (subs / "submission_metadata.yml").write_text(bomb)
    assert read_gradescope_metadata(subs / "submission_metadata.yml") == {}
    assert [e.student for e in discover(subs)] == ["submission_101"]
    (subs / "submission_metadata.yml").write_text("x" * (9 << 20))
    assert read_gradescope_metadata(subs / "submission_metadata.yml") == {}
    (subs / "submission_metadata.yml").write_text(EXPORT_METADATA.format(a="a" * 500, b="b"))
    assert read_gradescope_metadata(subs / "submission_metadata.yml") == {"submission_102": "b"}


def test_student_ids_are_safe_folder_names() -> None:
    assert student_id("../../etc/passwd") == "_.._etc_passwd"
    assert student_id("Jane Doe") == "Jane_Doe"
    assert student_id("..") == "student"
    assert student_id("gradebook.csv") == "student-gradebook.csv"
    assert student_id("a@b.edu") == "a@b.edu"


def test_output_folder_inside_submissions_is_not_a_student(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "alice")
    (subs / "grades").mkdir()
    assert [e.student for e in discover(subs, exclude=[subs / "grades"])] == ["alice"]


# -- resumability -----------------------------------------------------------------------------------


def test_second_run_skips_and_regrade_regrades(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student_folder(subs, "alice")
    student_folder(subs, "bob")
    assert run(subs, out) == 0
    assert fake.calls == ["alice", "bob"]
    stamp = (out / "alice" / "result.json").stat().st_mtime_ns
    run(subs, out)
    assert fake.calls == ["alice", "bob"]  # nothing graded again
    assert (out / "alice" / "result.json").stat().st_mtime_ns == stamp
    run(subs, out, "--regrade")
    assert fake.calls == ["alice", "bob", "alice", "bob"]
    book = gradebook(out)
    assert book["alice"]["status"] == "graded" and book["alice"]["gelu"] == "10.0"
    for student in ("alice", "bob"):
        assert {p.name for p in (out / student).iterdir()} == {"result.json", "report.html", "gradescope"}
        assert (out / student / "gradescope" / "results.json").exists()
    assert not (out / WORK).exists()


def test_changed_content_or_problem_set_regrades(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student_folder(subs, "alice")
    student_folder(subs, "bob")
    run(subs, out)
    (subs / "bob" / "gelu.py").write_text("x = 2\n")
    run(subs, out)
    assert fake.calls == ["alice", "bob", "bob"]
    args = parse("batch", str(subs), "--out", str(out), "--device", "cpu", "--problems", "gelu,softmax")
    run_batch(options_from_args(args))
    assert fake.calls[3:] == ["alice", "bob"]


def test_killed_run_resumes_only_what_is_missing(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("a", "b", "c", "d"):
        student_folder(subs, name)
    run(subs, out)
    fake.calls.clear()
    # b: killed while writing result.json the first time (only a temporary file exists)
    (out / "b" / "result.json").unlink()
    (out / "b" / ".result.json.k1ll3d.tmp").write_text('{"schema_version": 1, "assig')
    # c: a truncated result.json (a disk filled up, a copy cut short)
    text = (out / "c" / "result.json").read_text()
    (out / "c" / "result.json").write_text(text[: len(text) // 2])
    # d: killed after result.json but the report went missing: re-rendered, not regraded
    (out / "d" / "report.html").unlink()
    (out / "d" / "gradescope" / ".results.json.x.tmp").write_text("{")
    run(subs, out)
    assert fake.calls == ["b", "c"]
    assert not list(out.rglob("*.tmp"))
    assert (out / "d" / "report.html").exists()
    assert all(r["status"] == "graded" for r in gradebook(out).values())


def test_interrupted_batch_keeps_what_is_done(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("a", "b", "c"):
        student_folder(subs, name)
    fake.fail["b"] = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        run(subs, out)
    book = gradebook(out)
    assert book["a"]["status"] == "graded"
    assert book["b"]["status"] == "missing" and book["c"]["status"] == "missing"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["missing"] == 2
    fake.fail.clear()
    fake.calls.clear()
    run(subs, out)
    assert fake.calls == ["b", "c"]
    assert json.loads((out / "summary.json").read_text())["interrupted"] is False


def test_a_grader_crash_is_an_error_row_and_is_retried(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("a", "b", "c"):
        student_folder(subs, name)
    fake.fail["b"] = RuntimeError("boom")
    assert run(subs, out) == 0
    book = gradebook(out)
    assert [book[s]["status"] for s in "abc"] == ["graded", "error", "graded"]
    assert "boom" in book["b"]["error"] and book["b"]["gelu"] == "" and book["b"]["total"] == ""  # not graded: no zero
    saved = Result.model_validate_json((out / "b" / "result.json").read_text())
    assert saved.status == "error" and saved.problems[0].status == "error"
    fake.fail.clear()
    fake.calls.clear()
    run(subs, out)
    assert fake.calls == ["b"]  # an infrastructure error is not a verdict: graded again
    assert gradebook(out)["b"]["status"] == "graded"


def test_bad_archives_are_error_rows_and_write_nothing_outside(tmp_path: Path, fake: FakeGrade) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student_folder(subs, "good")
    zip_of(subs / "slip.zip", {"gelu.py": b"x", "../../escaped.py": b"pwned"})
    with tarfile.open(subs / "link.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("gelu.py")
        info.type = tarfile.SYMTYPE
        info.linkname = "/etc/passwd"
        tf.addfile(info)
    zip_of(subs / "nested.zip", {"nested/gelu.py": b"y = 1\n"})
    (subs / "weird").mkdir()
    (subs / "weird" / "gelu.py").symlink_to("/etc/hostname")
    run(subs, out)
    book = gradebook(out)
    assert book["slip"]["status"] == "error" and "'..'" in book["slip"]["error"]
    assert book["link"]["status"] == "error" and "symbolic link" in book["link"]["error"]
    assert book["weird"]["status"] == "error" and "symbolic link" in book["weird"]["error"]
    assert book["good"]["status"] == "graded" and book["nested"]["status"] == "graded"
    assert not list(tmp_path.rglob("escaped.py"))
    nested = Result.model_validate_json((out / "nested" / "result.json").read_text())
    assert nested.submission.path.endswith("nested.zip")
    assert fake.calls == ["good", "nested"]
    # a bad archive is a final verdict on that archive: not unpacked and graded again...
    run(subs, out)
    assert fake.calls == ["good", "nested"]
    # ...unless asked
    run(subs, out, "--retry-errors")
    assert gradebook(out)["slip"]["status"] == "error"


def test_summary_flags_the_default_secret(tmp_path: Path, fake: FakeGrade, monkeypatch: pytest.MonkeyPatch) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    student_folder(subs, "a")
    monkeypatch.delenv("GRADER_SECRET", raising=False)
    run(subs, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["default_secret"] is True
    assert any("DEFAULT secret" in w for w in summary["warnings"])
    assert summary["students"] == 1 and summary["graded"] == 1 and summary["mode"] == "subprocess"
    monkeypatch.setenv("GRADER_SECRET", "a-real-secret")
    run(subs, out, "--regrade")
    assert json.loads((out / "summary.json").read_text())["default_secret"] is False


def test_unknown_problem_is_refused(tmp_path: Path, fake: FakeGrade) -> None:
    subs = tmp_path / "subs"
    student_folder(subs, "a")
    args = parse("batch", str(subs), "--out", str(tmp_path / "out"), "--problems", "gelu,nope")
    with pytest.raises(BatchError, match="nope"):
        run_batch(options_from_args(args))


def test_one_batch_per_output_folder(tmp_path: Path) -> None:
    with BatchLock(tmp_path / ".batch.lock"):
        with pytest.raises(BatchError, match="another batch"):
            with BatchLock(tmp_path / ".batch.lock"):
                pass


def test_wall_limit_sums_the_problem_limits(tmp_path: Path) -> None:
    assignment = load_assignment()
    gelu = [p for p in assignment.problems if p.name == "gelu"]
    options = options_from_args(parse("batch", str(tmp_path), "--out", str(tmp_path / "out"), "--timeout", "20"))
    assert options.wall_limit(gelu) == STARTUP_ALLOWANCE_S + 20 + PER_PROBLEM_ALLOWANCE_S
    assert dataclasses.replace(options, container_timeout=7).wall_limit(gelu) == 7


# -- checking what a run left behind ------------------------------------------------------------------


def test_collect_result_rejects_garbage(tmp_path: Path) -> None:
    assignment = load_assignment()
    sub = student_folder(tmp_path, "s")
    task = Task(Entry("s", sub, "folder"), tmp_path / "o", tmp_path / "w", folder=sub, sha=submission_hash(sub))
    out = tmp_path / "raw"
    out.mkdir()
    with pytest.raises(BadResult, match="no result.json"):
        collect_result(out, task, assignment)
    (out / "result.json").write_text("garbage{")
    with pytest.raises(BadResult, match="not a valid result record"):
        collect_result(out, task, assignment)
    good = fake_result(assignment, sub, "s", ("gelu",))
    (out / "result.json").write_text(good.model_dump_json())
    assert collect_result(out, task, assignment).submission.path == str(sub)
    other = good.model_copy(deep=True)
    other.assignment.version = "1999.1"
    (out / "result.json").write_text(other.model_dump_json())
    with pytest.raises(BadResult, match="1999.1"):
        collect_result(out, task, assignment)
    forged = good.model_copy(deep=True)
    forged.submission.sha256 = "0" * 64
    (out / "result.json").write_text(forged.model_dump_json())
    with pytest.raises(BadResult, match="hash mismatch"):
        collect_result(out, task, assignment)


# -- real grading, no Docker -------------------------------------------------------------------------


def test_real_batch_one_at_a_time_with_a_nested_archive(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    shutil.copytree(CORRECT, subs / "correct")
    zip_of(subs / "zipped.zip", {f"zipped/{p.name}": p.read_bytes() for p in CORRECT.glob("*.py")})
    assert run(subs, out, "--timeout", "60") == 0
    book = gradebook(out)
    assert book["correct"]["status"] == "graded" and float(book["correct"]["gelu"]) == 10.0
    assert book["zipped"]["status"] == "graded" and float(book["zipped"]["gelu"]) == 10.0
    assert book["correct"]["gpu"] == "cpu"


def test_real_subprocess_batch_two_at_once(tmp_path: Path) -> None:
    subs, out = tmp_path / "subs", tmp_path / "out"
    shutil.copytree(CORRECT, subs / "correct")
    broken = subs / "crashes"
    shutil.copytree(CORRECT, broken)
    (broken / "gelu.py").write_text("import os\n\ndef triton_gelu(x):\n    os._exit(3)\n")
    assert run(subs, out, "--timeout", "60", "--jobs", "2") == 0
    book = gradebook(out)
    assert float(book["correct"]["gelu"]) == 10.0
    assert book["crashes"]["status"] == "graded" and float(book["crashes"]["gelu"]) == 0.0
    result = Result.model_validate_json((out / "crashes" / "result.json").read_text())
    assert "exited with code 3" in json.dumps(result.model_dump())
    assert json.loads((out / "summary.json").read_text())["mode"] == "subprocess"


class SharedGpuRunner:
    """Stands in for a runner that grades several at once on one GPU: the student `crowded` runs
    out of GPU memory while others are being graded, and not when graded alone."""

    parallel = True

    def __init__(self, fake: FakeGrade, ctx: Any) -> None:
        self.fake, self.ctx = fake, ctx
        self.slots: list[str | None] = ["0", "0"]
        self.beside: dict[str, list[int]] = {}  # per student, per grading: how many others ran meanwhile
        self.committed: dict[str, list[bool]] = {}  # per student, per grading: a result.json there as it started
        self.running: set[str] = set()
        self.lock = threading.Lock()
        self.meet = threading.Barrier(2, timeout=30)

    def run(self, task: Task, slot: str | None) -> Result:
        with self.lock:
            first = task.student not in self.beside
            self.beside.setdefault(task.student, [])
            self.committed.setdefault(task.student, []).append((task.out / "result.json").exists())
            self.running.add(task.student)
        try:
            if first and task.student in ("crowded", "x"):
                self.meet.wait()  # the first two start together, whatever the machine's load
            with self.lock:
                seen = self.running - {task.student}
            self.fake.calls.append(task.student)
            result = fake_result(self.ctx.assignment, task.folder, task.student, self.ctx.command.problems)
            if first and task.student in ("crowded", "x"):
                self.meet.wait()  # and are both running until each has looked
            self.beside[task.student].append(len(seen))
            if task.student == "crowded" and seen:
                result.problems[0].contended = "out_of_memory"
            return result
        finally:
            with self.lock:
                self.running.discard(task.student)

    def stop(self) -> None:
        pass


def crowded_class(tmp_path: Path, fake: FakeGrade, device: str) -> tuple[list[str], SharedGpuRunner, Path]:
    """The class crowded, x, y graded two at once by SharedGpuRunner as on `device`: the order
    results came in, the runner, the output folder."""
    from rich.progress import Progress

    from grader.course.batch.resume import ResumeChanges
    from grader.course.batch.run import ClassBook, _grade_all, batch_context, plan_tasks

    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("crowded", "x", "y"):  # in this order: crowded and x start together
        shutil.copytree(CORRECT, subs / name)
    batch = options_from_args(parse("batch", str(subs), "--out", str(out), "--device", "cpu", "--problems", "gelu"))
    ctx = batch_context(batch, load_assignment(batch.spec))
    ctx = dataclasses.replace(ctx, command=ctx.command.model_copy(update={"device": device}))
    runner = SharedGpuRunner(fake, ctx)
    out.mkdir()
    book = ClassBook(out, ["gelu"], {}, ["crowded", "x", "y"])
    todo = plan_tasks(discover(subs), batch, ctx, book, ResumeChanges.under(ctx.assignment), lambda _: None)
    with Progress() as progress:
        graded = list(_grade_all(todo, runner, ctx, progress, progress.add_task("grading", total=3)))
    return [task.student for task, _, _ in graded], runner, out


def test_a_grading_crowded_out_beside_others_is_graded_again_alone(tmp_path: Path, fake: FakeGrade) -> None:
    # a result that ran out of GPU memory (or of its time limit) while it shared the GPU may be the
    # other gradings' doing: the batch grades it again once every other grading has ended, and the
    # grading alone is the one kept, saying so; the others are graded once
    order, runner, out = crowded_class(tmp_path, fake, "cuda")
    assert order[-1] == "crowded"  # kept back until the others ended
    assert runner.beside["crowded"][-1] == 0 and len(runner.beside["crowded"]) == 2
    assert len(runner.beside["x"]) == len(runner.beside["y"]) == 1
    kept = Result.model_validate_json((out / "crowded" / "result.json").read_text())
    assert kept.problems[0].contended is None
    assert any("graded again alone: gelu ran out of GPU memory" in w for w in kept.warnings)
    assert not (out / WORK / "crowded").exists()  # its files, kept for the second grading, are gone
    # the result beside others was never committed: a batch killed before the grading alone leaves
    # no result.json for it, so a resumed batch grades it again rather than keep the crowded one
    assert runner.committed["crowded"] == [False, False]


def test_on_a_cpu_nothing_is_shared_so_nothing_is_graded_again(tmp_path: Path, fake: FakeGrade) -> None:
    _, runner, out = crowded_class(tmp_path, fake, "cpu")
    assert len(runner.beside["crowded"]) == 1
    kept = Result.model_validate_json((out / "crowded" / "result.json").read_text())
    assert kept.problems[0].contended == "out_of_memory" and not kept.warnings
