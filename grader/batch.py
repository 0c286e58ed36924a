"""Grading a whole class: one result folder per student, a gradebook, a summary.

Input: a folder with one entry per student (a folder, an archive, or a Gradescope export of
`submission_*` folders); ids come from the entry's name, a manifest, or Gradescope's metadata.
Archives are unpacked by grader.archives into DIR/.work/ and never trusted.

Three ways to run a submission, all ending in the same checked `Result`:
- in process (the default): `grade()` directly, one student at a time;
- subprocesses (`--jobs N` or `--gpus` without Docker): `grader grade` per student, N at once,
  one GPU each through CUDA_VISIBLE_DEVICES;
- containers (`--docker`): one container per student through grader.containers.

Never lose a row: a student whose result.json records the same content hash, assignment version,
problems and device kind is skipped unless --regrade. Every file is written atomically and
result.json last, so it marks a complete set; a batch killed at any moment and started again
grades only what is missing. Whatever a submission does (crash, hang, garbage, a bad archive),
it gets an error row with the reason, and the batch goes on.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import fcntl
import hashlib
import io
import json
import os
import platform
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from grader import archives, gradebook, gradescope_metadata, kernel_cache, rescore
from grader.containers import Cancelled
from grader.orchestrator import DEFAULT_SECRET, GradeOptions, grade, resolve_device, submission_hash
from grader.records import AssignmentRef, Environment, ProblemResult, Result, SubmissionRef
from grader.report import gradescope_json, render_html, write_atomic
from grader.spec import Assignment, Problem, load_assignment
from grader.summary import batch_table, progress_line
from grader.text import safe_text

ROOT = Path(__file__).resolve().parent.parent
WORK = ".work"
RESERVED = {"gradebook.csv", "summary.json", WORK}
MANIFESTS = ("manifest.csv", "manifest.json")
GRADESCOPE_METADATA = "submission_metadata.yml"
# An error that says nothing about the submission (the engine died, the grader broke): such a
# row is graded again by the next run instead of being kept.
INFRA = "infrastructure: "
MAX_RESULT_BYTES = 32 << 20
SKIPPED_FOLDERS = {".git", "__pycache__", ".ipynb_checkpoints"}  # never graded, not counted
STARTUP_ALLOWANCE_S = 120.0
PER_PROBLEM_ALLOWANCE_S = 60.0


class BatchError(RuntimeError):
    """The batch cannot start (bad folder, bad manifest, no image): nothing was graded."""


class BadResult(Exception):
    """What a grading run left behind is not a usable result; the message says why."""


# -- discovering the class ---------------------------------------------------------------------


@dataclass
class Entry:
    """One student's entry in the submissions folder."""

    student: str
    source: Path
    kind: str  # "folder" | "archive" | "invalid"
    error: str = ""


def student_id(text: str) -> str:
    """A student id that is safe as a folder name: no separators, no leading dot, not reserved."""
    cleaned = re.sub(r"[^A-Za-z0-9._@+-]+", "_", text.strip()).lstrip(".")[:100] or "student"
    return f"student-{cleaned}" if cleaned in RESERVED else cleaned


def read_manifest(root: Path) -> dict[str, str]:
    """entry name -> student id from manifest.csv or manifest.json in `root`, if there is one.

    CSV: a header naming an entry column (entry, file, folder, submission, path or name) and an
    id column (student, student_id, sid, id or email); without such a header, the first two
    columns. JSON: {"entry": "student", ...} or [{"entry": ..., "student": ...}, ...].
    """
    path_csv, path_json = root / MANIFESTS[0], root / MANIFESTS[1]
    if path_csv.exists():
        rows = list(csv.reader(io.StringIO(path_csv.read_text(encoding="utf-8-sig"))))
        rows = [r for r in rows if any(c.strip() for c in r)]
        if not rows:
            return {}
        header = [c.strip().lower() for c in rows[0]]
        entry_col = next((header.index(k) for k in ("entry", "file", "folder", "submission", "path", "name") if k in header), None)
        id_col = next((header.index(k) for k in ("student", "student_id", "sid", "id", "email") if k in header), None)
        if entry_col is None or id_col is None:
            entry_col, id_col = 0, 1
        else:
            rows = rows[1:]
        mapping = {}
        for n, row in enumerate(rows, start=2):
            if len(row) <= max(entry_col, id_col):
                raise BatchError(f"{path_csv}: line {n} has {len(row)} column(s); expected an entry and a student id")
            mapping[row[entry_col].strip()] = row[id_col].strip()
        return mapping
    if path_json.exists():
        try:
            data = json.loads(path_json.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BatchError(f"{path_json}: not valid JSON ({exc})") from None
        if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
            return {str(k): v for k, v in data.items()}
        if isinstance(data, list) and all(isinstance(d, dict) and "entry" in d and "student" in d for d in data):
            return {str(d["entry"]): str(d["student"]) for d in data}
        raise BatchError(f'{path_json}: expected {{"entry": "student id", ...}} or [{{"entry": ..., "student": ...}}, ...]')
    return {}


# submission folder -> student id from an export's submission_metadata.yml (read as YAML)
read_gradescope_metadata = gradescope_metadata.read_export_metadata


def _gradescope_entries(folder: Path) -> list[tuple[str, Path]]:
    metadata = read_gradescope_metadata(folder / GRADESCOPE_METADATA)
    found = []
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and sub.name.startswith("submission_"):
            found.append((metadata.get(sub.name, sub.name), sub))
    return found


def discover(root: Path, exclude: list[Path] | None = None) -> list[Entry]:
    """Every student entry under `root`, with ids made unique; sorted by id."""
    if not root.is_dir():
        raise BatchError(f"{root} is not a folder of submissions")
    manifest = read_manifest(root)
    skip = {p.resolve() for p in exclude or []}
    raw: list[tuple[str, Path]] = []
    if (root / GRADESCOPE_METADATA).exists():
        raw = _gradescope_entries(root)
    else:
        for path in sorted(root.iterdir()):
            if path.name.startswith(".") or path.name in MANIFESTS or path.resolve() in skip:
                continue
            if path.is_dir() and (path / GRADESCOPE_METADATA).exists():
                raw += _gradescope_entries(path)
            elif path.is_dir() or archives.archive_suffix(path) or archives.is_unsupported_archive(path):
                name = manifest.get(path.name) or manifest.get(archives.strip_archive_suffix(path.name)) or archives.strip_archive_suffix(path.name)
                raw.append((name, path))
    entries: list[Entry] = []
    taken: dict[str, Path] = {}
    for name, path in raw:
        sid = student_id(name)
        kind = "folder" if path.is_dir() and not path.is_symlink() else "archive"
        error = ""
        if path.is_symlink():
            kind, error = "invalid", f"{path.name} is a symbolic link: submit the files themselves"
        elif kind == "archive" and archives.archive_suffix(path) is None:
            kind, error = "invalid", f"{path.name}: unsupported archive format (use .zip or .tar.gz)"
        if sid in taken:
            first = taken[sid]
            n = 2
            while f"{sid}-dup{n}" in taken:
                n += 1
            error = f"duplicate student id {sid!r}: {first.name} and {path.name} both map to it (fix the names or the manifest)"
            sid, kind = f"{sid}-dup{n}", "invalid"
        taken[sid] = path
        entries.append(Entry(sid, path, kind, error))
    return sorted(entries, key=lambda e: e.student)


# -- one student's task --------------------------------------------------------------------------


@dataclass
class Task:
    entry: Entry
    out: Path  # DIR/<student>: the committed files
    work: Path  # DIR/.work/<student>: unpacked files, raw output of the run
    folder: Path | None = None  # the submission folder to grade
    sha: str = ""
    error: str = ""

    @property
    def student(self) -> str:
        return self.entry.student


def _file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_folder(folder: Path, limits: archives.Limits) -> None:
    """A folder entry gets the archive rules too: no links, the same caps on count and size."""
    files = total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in SKIPPED_FOLDERS or (Path(dirpath) / d).is_symlink()]
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if path.is_symlink():
                raise archives.ArchiveError(f"{path.relative_to(folder)} is a symbolic link (links are not allowed in a submission)")
        for name in filenames:
            path = Path(dirpath) / name
            if not path.is_file():
                raise archives.ArchiveError(f"{path.relative_to(folder)} is not a regular file")
            files += 1
            total += path.stat().st_size
        if files > limits.max_files or total > limits.max_total_bytes:
            raise archives.ArchiveError(f"more than {limits.max_files} files or {limits.max_total_bytes} bytes")


def prepare(entry: Entry, out: Path, modules: list[str], limits: archives.Limits = archives.Limits()) -> Task:
    """Unpack (archives) and locate the submission, and hash its content."""
    task = Task(entry, out / entry.student, out / WORK / entry.student)
    source = entry.source
    if entry.kind == "invalid":
        task.error = entry.error
        task.sha = _file_sha(source) if source.is_file() and not source.is_symlink() else hashlib.sha256(str(source).encode()).hexdigest()
        return task
    try:
        if entry.kind == "archive":
            shutil.rmtree(task.work, ignore_errors=True)
            task.work.mkdir(parents=True)
            unpacked = archives.unpack(source, task.work / "unpacked", limits)
        else:
            check_folder(source, limits)
            unpacked = source
        task.folder = archives.find_submission_root(unpacked, modules)
        task.sha = submission_hash(task.folder)
    except archives.ArchiveError as exc:
        task.error = f"bad archive: {exc}" if entry.kind == "archive" else f"bad submission folder: {exc}"
        task.sha = _file_sha(source) if source.is_file() else hashlib.sha256(str(source).encode()).hexdigest()
        task.folder = None
    except OSError as exc:
        task.error = f"cannot read {source.name}: {exc}"
        task.sha = hashlib.sha256(str(source).encode()).hexdigest()
        task.folder = None
    return task


# -- results: reading, checking, writing ----------------------------------------------------------


def _selected(assignment: Assignment, problems: list[str] | None) -> list[Problem]:
    return [p for p in assignment.problems if not problems or p.name in problems]


def read_result(path: Path) -> Result | None:
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            return None
        return Result.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None


def previous(out: Path, sha: str, assignment: Assignment, problems: list[str], interpreter: bool, retry_errors: bool = False) -> Result | None:
    """The result already in `out` when it is for this very grading, else None.

    Same content hash, assignment version, set of problems and device kind (interpreter or
    GPU). A "graded" result counts, and so does an error the submission caused (a bad archive, a
    hang); an infrastructure error does not, nor any error with `retry_errors`.
    """
    old = read_result(out / "result.json")
    if old is None:
        return None
    same = (
        old.submission.sha256 == sha
        and old.assignment.version == assignment.assignment.version
        and old.assignment.name == assignment.assignment.name
        and sorted(p.name for p in old.problems) == sorted(problems)
        and old.environment.interpreter == interpreter
    )
    if not same:
        return None
    if old.status == "error" and (retry_errors or old.error.startswith(INFRA)):
        return None
    if not (out / "report.html").exists() or not (out / "gradescope" / "results.json").exists():
        commit_result(old, out)  # killed between files: the record is whole, re-render the rest
    return old


def commit_result(result: Result, out: Path) -> None:
    """report.html and gradescope/results.json, then result.json: its presence marks a whole set."""
    write_atomic(out / "report.html", render_html(result))
    write_atomic(out / "gradescope" / "results.json", gradescope_json(result))
    write_atomic(out / "result.json", result.model_dump_json(indent=2))


def commit_or_error(ctx: "Context", task: "Task", result: Result) -> Result:
    """Commit `result`; one that cannot be written becomes this student's error row instead.

    Whatever a submission made of its result (issue 17: text no encoder takes), the batch goes
    on, and the error row is kept, so that a re-run does not stop at the same student either.
    """
    try:
        commit_result(result, task.out)
        return result
    except Exception as exc:  # noqa: BLE001 - any failure here is this student's, never the batch's
        reason = f"the grader could not write this student's result: {type(exc).__name__}: {safe_text(str(exc))[:300]}"
        error = ctx.error(task, reason, result.environment.isolation, result.duration_s)
        try:
            commit_result(error, task.out)
        except Exception:  # noqa: BLE001 - the gradebook still gets the row
            pass
        return error


def remove_partial_files(out: Path) -> int:
    """Temporary files a killed run left behind (write_atomic's `.name.XXXX.tmp`)."""
    removed = 0
    for tmp in list(out.glob(".*.tmp")) + list(out.glob("gradescope/.*.tmp")):
        tmp.unlink(missing_ok=True)
        removed += 1
    return removed


def error_result(assignment: Assignment, task: Task, reason: str, problems: list[Problem], device: str, isolation: str, duration: float = 0.0) -> Result:
    """A complete record for a submission that could not be graded, so the gradebook stays whole."""
    short = reason.strip().splitlines()[0] if reason.strip() else "error"
    return Result(
        assignment=AssignmentRef(name=assignment.assignment.name, version=assignment.assignment.version),
        submission=SubmissionRef(path=str(task.entry.source), sha256=task.sha, student=task.student),
        environment=Environment(device=device, torch="", triton="", python=platform.python_version(), isolation=isolation, interpreter=device == "cpu"),
        score=0.0,
        max_score=sum(p.max_score for p in problems),
        duration_s=round(duration, 3),
        graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="error",
        error=reason.strip()[:4000],
        problems=[ProblemResult(name=p.name, title=p.title, score=0.0, max_score=p.max_score, status="error", message=short[:500]) for p in problems],
    )


def collect_result(out: Path, task: Task, assignment: Assignment) -> Result:
    """The result.json a grading run wrote into `out`, checked; BadResult says what is wrong."""
    path = out / "result.json"
    if not path.is_file():
        raise BadResult("it wrote no result.json")
    if path.stat().st_size > MAX_RESULT_BYTES:
        raise BadResult(f"its result.json is over {MAX_RESULT_BYTES >> 20} MiB")
    try:
        result = Result.model_validate_json(path.read_bytes())
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:300]
        raise BadResult(f"its result.json is not a valid result record ({first})") from None
    if (result.assignment.name, result.assignment.version) != (assignment.assignment.name, assignment.assignment.version):
        raise BadResult(
            f"it graded assignment {result.assignment.name} {result.assignment.version}, not {assignment.assignment.name} "
            f"{assignment.assignment.version} (is the image out of date? `grader image build`)"
        )
    if result.submission.sha256 != task.sha:
        raise BadResult("the files it graded differ from the submission (content hash mismatch)")
    result.submission.path = str(task.entry.source)
    result.submission.student = task.student
    return result


# -- runners ------------------------------------------------------------------------------------


class Runner(Protocol):
    slots: list[str | None]
    parallel: bool

    def run(self, task: Task, slot: str | None) -> Result: ...

    def stop(self) -> None: ...


@dataclass
class Context:
    """What every runner needs to know about the batch."""

    assignment: Assignment
    problems: list[Problem]
    options: GradeOptions
    args: argparse.Namespace
    device: str  # "cpu" or "cuda": the kind of grading (interpreter or real kernels)
    wall_s: float
    hide: list[Path]

    def error(self, task: Task, reason: str, isolation: str, duration: float = 0.0, gpu: str | None = None) -> Result:
        result = error_result(self.assignment, task, reason, self.problems, self.device, isolation, duration)
        if gpu is not None:
            result.environment.device = f"cuda (GPU {gpu})"
        return result

    def grade_args(self) -> list[str]:
        """`grader grade` options shared by the subprocess and container runners."""
        out = ["--device", self.device]
        if self.args.timeout:
            out += ["--timeout", f"{self.args.timeout:g}"]
        if self.options.problems:
            out += ["--problems", ",".join(self.options.problems)]
        if getattr(self.args, "public_only", False):
            out.append("--public-only")
        if getattr(self.args, "no_timing", False):
            out.append("--no-timing")
        if getattr(self.args, "parallel", None):
            out += ["--parallel", str(self.args.parallel)]
        if getattr(self.args, "no_kernel_cache", False):
            out.append("--no-kernel-cache")
        return out


def _tail_lines(text: str, n: int = 12) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-n:])


class InProcessRunner:
    """grade() in this process, one student at a time (the worker sandbox still applies)."""

    parallel = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.slots: list[str | None] = [None]

    def run(self, task: Task, slot: str | None) -> Result:
        assert task.folder is not None
        started = time.monotonic()
        options = dataclasses.replace(self.ctx.options, student=task.student, progress=None)
        try:
            result = grade(self.ctx.assignment, task.folder, options)
        except Exception as exc:  # grade() should not raise for a submission: keep the batch going
            return self.ctx.error(task, f"{INFRA}the grader failed on this submission: {type(exc).__name__}: {exc}", "process", time.monotonic() - started)
        result.submission.path = str(task.entry.source)
        result.submission.student = task.student
        return result

    def stop(self) -> None:
        pass


class SubprocessRunner:
    """`grader grade` in a child process per student: N at once, one GPU each when given."""

    parallel = True

    def __init__(self, ctx: Context, slots: list[str | None]) -> None:
        self.ctx = ctx
        self.slots = slots
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self.stopping = threading.Event()

    def run(self, task: Task, slot: str | None) -> Result:
        assert task.folder is not None
        started = time.monotonic()
        out = task.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        log = task.work / "grader.log"
        spec = Path(self.ctx.args.spec).resolve()
        argv = [sys.executable, "-m", "grader.cli", "grade", str(task.folder.resolve()), "--out", str(out.resolve()), "--spec", str(spec)]
        argv += self.ctx.grade_args() + ["--worker-user", self.ctx.options.worker_user]
        env = {k: v for k, v in os.environ.items() if k not in ("GRADER_SECRET", "GRADER_HIDE")}
        env["GRADER_SECRET"] = self.ctx.options.secret  # the environment, never argv
        env["GRADER_HIDE"] = os.pathsep.join(str(p) for p in self.ctx.hide)
        if self.ctx.options.kernel_cache is not None:
            env[kernel_cache.ENV] = str(self.ctx.options.kernel_cache)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        if slot is not None:
            env["CUDA_VISIBLE_DEVICES"] = slot
        with open(log, "wb") as handle:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=handle, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT), start_new_session=True)
        with self._lock:
            self._live.add(proc)
        try:
            try:
                code = proc.wait(timeout=self.ctx.wall_s)
            except subprocess.TimeoutExpired:
                _killpg(proc)
                return self.ctx.error(task, f"grading ran past its wall-clock limit of {self.ctx.wall_s:g} s and was stopped", "process", time.monotonic() - started, gpu=slot)
        finally:
            with self._lock:
                self._live.discard(proc)
        if self.stopping.is_set():
            raise Cancelled()
        text = log.read_text(errors="replace") if log.exists() else ""
        if code != 0:
            return self.ctx.error(task, f"{INFRA}`grader grade` exited with code {code}:\n{_tail_lines(text)}", "process", time.monotonic() - started, gpu=slot)
        try:
            return collect_result(out, task, self.ctx.assignment)
        except BadResult as exc:
            return self.ctx.error(task, f"{INFRA}`grader grade` left no usable result: {exc}", "process", time.monotonic() - started, gpu=slot)

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            _killpg(proc)


def _killpg(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


class DockerRunner:
    """One container per student (grader.containers), one GPU per container when given."""

    parallel = True
    entrypoint: list[str] | None = None  # None: the image's grader; tests swap in fakes (crash, garbage)

    def __init__(self, ctx: Context, slots: list[str | None], client: Any, image: str, limits: Any, batch_label: str) -> None:
        from grader.containers import ContainerRunner

        self.ctx = ctx
        self.slots = slots
        self.image = image
        self.batch_label = batch_label
        self.runner = ContainerRunner(client, limits)

    def run(self, task: Task, slot: str | None) -> Result:
        from grader.containers import WORKER_USER, ContainerJob

        assert task.folder is not None
        started = time.monotonic()
        out = task.work / "out"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True, mode=0o700)
        os.chmod(out, 0o700)  # the worker (another uid inside) can neither read nor write it
        args = ["grade", "/submission", "--out", "/out", *self.ctx.grade_args(), "--worker-user", WORKER_USER]
        job = ContainerJob(
            student=task.student,
            submission=task.folder,
            out=out,
            image=self.image,
            args=args,
            gpu=slot,
            env={"GRADER_SECRET": self.ctx.options.secret},
            batch_label=self.batch_label,
            entrypoint=self.entrypoint,
        )
        try:
            outcome = self.runner.run(job)
        except Cancelled:
            raise
        except Exception as exc:  # docker.errors.*, requests: the engine, not the student
            if self.runner.stopping.is_set():
                raise Cancelled() from None
            return self.ctx.error(task, f"{INFRA}docker: {type(exc).__name__}: {exc}", "docker", time.monotonic() - started, gpu=slot)
        elapsed = time.monotonic() - started
        logs = _tail_lines(outcome.logs)
        if outcome.timed_out:
            return self.ctx.error(task, f"the container ran past its wall-clock limit of {self.ctx.wall_s:g} s and was killed", "docker", elapsed, gpu=slot)
        if outcome.oom_killed:
            return self.ctx.error(task, f"the container ran out of memory (limit {self.runner.limits.memory}) and was killed", "docker", elapsed, gpu=slot)
        if outcome.exit_code != 0:
            return self.ctx.error(task, f"the grading container exited with code {outcome.exit_code}:\n{logs}", "docker", elapsed, gpu=slot)
        try:
            return collect_result(out, task, self.ctx.assignment)
        except BadResult as exc:
            return self.ctx.error(task, f"the grading container produced no usable result: {exc}\n{logs}".strip(), "docker", elapsed, gpu=slot)

    def stop(self) -> None:
        self.runner.kill_all()


# -- the gradebook --------------------------------------------------------------------------------


# gradebook.csv and summary.json are grader.gradebook's: empty cells for ungraded rows, flags,
# cells that cannot start a spreadsheet formula
gradebook_row = gradebook.row
write_gradebook = gradebook.write


# -- the batch ----------------------------------------------------------------------------------


@dataclass
class BatchLock:
    """Only one batch writes to an output folder at a time."""

    path: Path
    handle: Any = None

    def __enter__(self) -> "BatchLock":
        self.handle = open(self.path, "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise BatchError(f"another batch is writing to {self.path.parent} (it holds {self.path.name})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


class _TermAsInterrupt:
    """SIGTERM behaves like Ctrl-C while the batch runs, so containers are cleaned up either way."""

    def __enter__(self) -> None:
        self.old = None
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self.old is not None:
            signal.signal(signal.SIGTERM, self.old)


def wall_limit(args: argparse.Namespace, problems: list[Problem]) -> float:
    """Wall-clock limit for one student: every problem's limit, plus start-up, unless given."""
    given = getattr(args, "container_timeout", None)
    if given:
        return float(given)
    per_problem = sum((args.timeout or p.time_limit_s) + PER_PROBLEM_ALLOWANCE_S for p in problems)
    return STARTUP_ALLOWANCE_S + per_problem


def _warn_secret(console: Console) -> str:
    text = (
        "This batch grades with the DEFAULT secret: anyone with the handout can predict the hidden inputs. "
        "Set GRADER_SECRET (or --secret-file) for real grading."
    )
    console.print(Panel(text, title="warning: default secret", style="bold red"))
    return text


def _make_runner(ctx: Context, args: argparse.Namespace, out: Path, console: Console) -> tuple[Runner, dict[str, Any]]:
    from grader.containers import parse_gpus

    if getattr(args, "backend", "local") != "local":
        from grader.cluster import make_runner  # Ray or Slurm: grader/cluster/

        return make_runner(ctx, args, out, console)
    gpus = parse_gpus(getattr(args, "gpus", None))
    jobs = max(1, int(getattr(args, "jobs", 1) or 1))
    if getattr(args, "docker", False):
        from grader.containers import ContainerLimits, content_hash, docker_client, image_tag, inspect_image, remove_stale

        client = docker_client()
        tag = getattr(args, "image", None) or image_tag(ctx.assignment.assignment.version, cpu=not gpus)
        info = inspect_image(client, tag)
        if info.version and info.version != ctx.assignment.assignment.version:
            raise BatchError(f"the image {tag} grades assignment version {info.version}, but the spec is version {ctx.assignment.assignment.version}: rebuild it with `grader image build`")
        meta: dict[str, Any] = {"mode": "docker", "image": tag, "gpus": gpus}
        if info.content and info.content != content_hash():
            note = f"the image {tag} was built from other grader/assignment/reference files than this checkout: rebuild it with `grader image build` if that is not intended"
            console.print(f"[yellow]warning:[/yellow] {note}")
            meta["image_warning"] = note
        slots: list[str | None] = list(gpus) if gpus else [None] * jobs
        cpus = getattr(args, "cpus", None) or max(1.0, (os.cpu_count() or 2) / len(slots))
        limits = ContainerLimits(memory=getattr(args, "memory", None) or "16g", pids=getattr(args, "pids", None) or 4096, cpus=float(cpus), wall_s=ctx.wall_s)
        label = hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:16]
        stale = remove_stale(client, label)
        if stale:
            console.print(f"removed {stale} container(s) left by an earlier, killed run of this batch")
        meta["limits"] = dataclasses.asdict(limits)
        return DockerRunner(ctx, slots, client, tag, limits, label), meta
    if gpus or jobs > 1:
        slots = list(gpus) if gpus else [None] * jobs
        return SubprocessRunner(ctx, slots), {"mode": "subprocess", "gpus": gpus, "jobs": len(slots)}
    return InProcessRunner(ctx), {"mode": "in-process", "gpus": []}


def run_batch(args: argparse.Namespace, make_options: Callable[..., Any], hidden_paths: Callable[..., list[Path]]) -> int:
    """`grader batch`: grade every entry of args.submissions into args.out. Returns the exit code."""
    # in a log (no terminal) Rich would wrap the class's table at 80 columns, a word a line
    console = Console() if sys.stdout.isatty() else Console(width=200)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    assignment = load_assignment(args.spec, hidden=False if getattr(args, "public_only", False) else None)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = Path(args.submissions)
    entries = discover(root, exclude=[out])
    hide = hidden_paths(args.spec, out) + [root.resolve()]
    if getattr(args, "secret_file", None):
        hide.append(Path(args.secret_file).resolve())  # as `grader grade` does: workers never see it
    options: GradeOptions = make_options(args, hide)
    known = [p.name for p in assignment.problems]
    unknown = [p for p in options.problems or [] if p not in known]
    if unknown:
        raise BatchError(f"--problems: unknown problem(s) {', '.join(unknown)}; the assignment has {', '.join(known)}")
    problems = _selected(assignment, options.problems)
    names = [p.name for p in problems]
    use_docker = bool(getattr(args, "docker", False))
    gpus_given = bool(getattr(args, "gpus", None))
    if getattr(args, "backend", "local") != "local":
        device = resolve_device("auto") if args.device == "auto" else args.device  # the nodes' GPUs, not this machine's
    elif use_docker:
        if args.device == "cuda" and not gpus_given:
            raise BatchError("--device cuda with --docker needs --gpus (all, or indices such as 0,1)")
        device = "cpu" if args.device == "cpu" or not gpus_given else "cuda"
    else:
        device = resolve_device(args.device)
    options.device = device
    ctx = Context(assignment, problems, options, args, device, wall_limit(args, problems), hide)

    warnings: list[str] = []
    if options.secret == DEFAULT_SECRET:
        warnings.append(_warn_secret(console))

    with BatchLock(out / ".batch.lock"):
        shutil.rmtree(out / WORK, ignore_errors=True)  # leftovers of a killed run: redone below
        runner, meta = _make_runner(ctx, args, out, console)
        meta = {
            "assignment": assignment.assignment.name,
            "version": assignment.assignment.version,
            "device": device,
            "problems": names,
            **meta,
            "default_secret": options.secret == DEFAULT_SECRET,
            "warnings": warnings + ([meta["image_warning"]] if "image_warning" in meta else []),
            "started_at": started_at,
        }
        modules = [p.module for p in problems]
        results: dict[str, Result | None] = {e.student: None for e in entries}
        spec_changes = rescore.ResumeChanges.under(assignment)
        slot_of: dict[str, str | None] = {}
        order = [e.student for e in entries]

        def book(final: bool = False, interrupted: bool = False) -> list[dict[str, Any]]:
            rows = [gradebook_row(s, results[s], names, slot_of.get(s)) for s in order]
            extra = {"finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "interrupted": interrupted} if final else {"running": True}
            write_gradebook(out, rows, names, {**meta, **extra})
            return rows

        interrupted = False
        try:
            with _TermAsInterrupt(), Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
            ) as progress:
                bar = progress.add_task("preparing", total=len(entries))
                todo: list[Task] = []
                for entry in entries:
                    progress.update(bar, description=f"preparing {entry.student}")
                    task = prepare(entry, out, modules)
                    if task.out.exists():
                        remove_partial_files(task.out)
                    old = None if args.regrade else previous(task.out, task.sha, assignment, names, device == "cpu", getattr(args, "retry_errors", False))
                    old = spec_changes.settle(entry.student, old, task.out, commit_result)  # re-scored, or None: graded again
                    if old is not None:
                        results[entry.student] = old
                        progress.advance(bar)
                    elif task.error:
                        result = commit_or_error(ctx, task, ctx.error(task, task.error, "none"))
                        results[entry.student] = result
                        progress.advance(bar)
                    else:
                        todo.append(task)
                skipped = len(entries) - len(todo)
                finished = skipped
                if spec_changes.rescored or spec_changes.regraded:
                    meta["spec_changes"] = spec_changes.as_meta()
                    for line in spec_changes.lines():
                        progress.console.print(f"[yellow]spec changed:[/yellow] {escape(line)}")
                progress.update(bar, description=f"grading ({skipped} already done)" if skipped else "grading")
                book()
                graded = _grade_all(todo, runner, ctx, progress, bar)
                try:
                    for task, result, slot in graded:
                        results[task.student], slot_of[task.student] = result, slot
                        book()
                        if not console.is_terminal:  # a log: the live bar draws nothing there
                            finished += 1
                            console.print(progress_line(finished, len(entries), task.student, result), markup=False, highlight=False, soft_wrap=True)
                finally:
                    graded.close()  # on Ctrl-C: stops the runner and its containers first
        except KeyboardInterrupt:
            interrupted = True
            raise
        finally:
            rows = book(final=True, interrupted=interrupted)
            shutil.rmtree(out / WORK, ignore_errors=True)
            if interrupted:
                done = sum(r["status"] != "missing" for r in rows)
                console.print(f"[yellow]interrupted:[/yellow] {done} of {len(rows)} students have results; run the same command again to grade the rest")

    console.print(batch_table(rows, names))
    for line in spec_changes.lines():
        console.print(f"[yellow]spec changed:[/yellow] {escape(line)}")
    for text in meta["warnings"]:
        console.print(f"[bold red]warning:[/bold red] {text}")
    errors = sum(r["status"] == "error" for r in rows)
    if errors:
        console.print(f"[red]{errors} student(s) could not be graded:[/red] see the error column of {out / 'gradebook.csv'}")
    console.print(f"wrote {out / 'gradebook.csv'}, {out / 'summary.json'} and a folder per student in {out}")
    return 0


def _grade_all(todo: list[Task], runner: Runner, ctx: Context, progress: Progress, bar: Any) -> Iterator[tuple[Task, Result, str | None]]:
    """Grade the tasks with the runner's slots; yields (task, committed result, slot) as each ends."""
    if hasattr(runner, "start"):
        runner.start(todo)  # a backend that takes the whole class at once (a Slurm job array)
    running: dict[str, float] = {}
    lock = threading.Lock()

    def describe() -> None:
        with lock:
            names = sorted(running)
        shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
        progress.update(bar, description=f"grading {shown}" if shown else "grading")

    def one(task: Task, slot: str | None) -> tuple[Result, str | None]:
        with lock:
            running[task.student] = time.monotonic()
        describe()
        try:
            try:
                result = runner.run(task, slot)
            except Cancelled:
                raise
            except Exception as exc:  # a bug or an engine failure: an error row, never a stopped batch
                result = ctx.error(task, f"{INFRA}{type(exc).__name__}: {exc}", "none")
            return commit_or_error(ctx, task, result), slot
        finally:
            with lock:
                running.pop(task.student, None)
            shutil.rmtree(task.work, ignore_errors=True)
            describe()

    if not runner.parallel:
        for task in todo:
            result, slot = one(task, runner.slots[0])
            progress.advance(bar)
            yield task, result, slot
        return

    free: queue.Queue[str | None] = queue.Queue()
    for slot in runner.slots:
        free.put(slot)

    def with_slot(task: Task) -> tuple[Result, str | None]:
        slot = free.get()
        try:
            return one(task, slot)
        finally:
            free.put(slot)

    pool = ThreadPoolExecutor(max_workers=len(runner.slots), thread_name_prefix="grade")
    futures: dict[Future[tuple[Result, str | None]], Task] = {}
    try:
        futures = {pool.submit(with_slot, task): task for task in todo}
        pending = set(futures)
        while pending:
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                task = futures[future]
                progress.advance(bar)
                try:
                    result, slot = future.result()
                except Cancelled:
                    continue
                yield task, result, slot
    except BaseException:
        for future in futures:
            future.cancel()
        runner.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
