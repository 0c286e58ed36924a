"""The run of a batch: lock the output folder, prepare every student, skip what stands, grade the rest.

Never lose a row: a student whose result.json records the same content hash, assignment version,
problems and device kind is skipped unless --regrade. A batch killed at any moment and started
again grades only what is missing. Whatever a submission does (crash, hang, garbage, a bad
archive), it gets an error row with the reason, and the batch goes on.
"""

from __future__ import annotations

import fcntl
import queue
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Generator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from grader.course.batch.context import Context, commit_or_error, selected_problems
from grader.course.batch.discovery import WORK, Entry, discover
from grader.course.batch.errors import BatchError
from grader.course.batch.options import BatchOptions
from grader.course.batch.order import heaviest_first
from grader.course.batch.results import alone_note, commit_result, contention, previous, remove_partial_files
from grader.course.batch.resume import ResumeChanges
from grader.course.batch.runner_choice import ClusterRunners, make_runner
from grader.course.batch.runners import Runner
from grader.course.batch.tasks import Task, prepare
from grader.course.containers.docker import Cancelled
from grader.engine.assignment.load import load_assignment
from grader.engine.orchestrator.launch import DEFAULT_SECRET, resolve_device
from grader.engine.records import gradebook
from grader.engine.records.console import batch_table, phase_line, phase_totals, progress_line
from grader.engine.records.model import Result
from grader.engine.records.text import printable
from grader.engine.spec.model import Assignment


@dataclass
class BatchLock:
    """Only one batch writes to an output folder at a time."""

    path: Path
    handle: Any = None

    def __enter__(self) -> BatchLock:
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


def _warn_secret(console: Console) -> str:
    text = (
        "This batch grades with the DEFAULT secret: anyone with the handout can predict the hidden inputs. "
        "Set GRADER_SECRET (or --secret-file) for real grading."
    )
    console.print(Panel(text, title="warning: default secret", style="bold red"))
    return text


def batch_device(batch: BatchOptions) -> str:
    """Where the class is graded: the nodes' GPUs on a cluster, the containers' with --docker, else here."""
    asked = batch.grading.device
    if batch.backend != "local":
        return resolve_device("auto") if asked == "auto" else asked  # the nodes' GPUs, not this machine's
    if batch.docker is not None:
        if asked == "cuda" and not batch.gpus:
            raise BatchError("--device cuda with --docker needs --gpus (all, or indices such as 0,1)")
        return "cpu" if asked == "cpu" or not batch.gpus else "cuda"
    return resolve_device(asked)


def batch_context(batch: BatchOptions, assignment: Assignment) -> Context:
    """What every grading of the batch shares: the problems asked for, the device, the limits."""
    known = [p.name for p in assignment.problems]
    unknown = [p for p in batch.grading.problems or [] if p not in known]
    if unknown:
        raise BatchError(f"--problems: unknown problem(s) {', '.join(unknown)}; the assignment has {', '.join(known)}")
    problems = selected_problems(assignment, batch.grading.problems)
    command = batch.grading.model_copy(update={"device": batch_device(batch)})
    return Context(assignment, problems, command, batch.wall_limit(problems))


@dataclass
class ClassBook:
    """The class's gradebook as the batch goes: one row per student, rewritten after every grading."""

    out: Path
    names: list[str]
    meta: dict[str, Any]
    order: list[str]
    results: dict[str, Result | None] = field(default_factory=dict)
    slot_of: dict[str, str | None] = field(default_factory=dict)
    #: students graded by this run (not kept from an earlier one): where their time went is reported
    graded: list[str] = field(default_factory=list)

    def write(self, final: bool = False, interrupted: bool = False) -> list[dict[str, Any]]:
        rows = [gradebook.row(s, self.results.get(s), self.names, self.slot_of.get(s)) for s in self.order]
        extra = (
            {"finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"), "interrupted": interrupted}
            if final
            else {"running": True}
        )
        gradebook.write(self.out, rows, self.names, {**self.meta, **extra})
        return rows


def plan_tasks(
    entries: list[Entry],
    batch: BatchOptions,
    ctx: Context,
    book: ClassBook,
    changes: ResumeChanges,
    done: Callable[[str], None],
) -> list[Task]:
    """Each student's resume decision: a stored result kept (re-scored if the spec changed), an error
    row for an entry that cannot be graded, or a task to grade. `done` is told of every decided one."""
    names = [p.name for p in ctx.problems]
    modules = [p.module for p in ctx.problems]
    todo: list[Task] = []
    for entry in entries:
        task = prepare(entry, book.out, modules)
        if task.out.exists():
            remove_partial_files(task.out)
        old = (
            None
            if batch.regrade
            else previous(task.out, task.sha, ctx.assignment, names, ctx.device == "cpu", batch.retry_errors)
        )
        old = changes.settle(entry.student, old, task.out, commit_result)  # re-scored, or None: graded again
        if old is not None:
            book.results[entry.student] = old
        elif task.error:
            book.results[entry.student] = commit_or_error(ctx, task, ctx.error(task, task.error, "none"))
        else:
            todo.append(task)
            continue
        done(entry.student)
    return todo


def _progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _grade_class(
    entries: list[Entry], batch: BatchOptions, ctx: Context, runner: Runner, book: ClassBook, console: Console
) -> tuple[list[dict[str, Any]], ResumeChanges]:
    """Plan, then grade what is left, the gradebook rewritten after each; its final rows, also on Ctrl-C."""
    changes = ResumeChanges.under(ctx.assignment)
    interrupted = False
    try:
        with _TermAsInterrupt(), _progress(console) as progress:
            bar = progress.add_task("preparing", total=len(entries))
            todo = plan_tasks(entries, batch, ctx, book, changes, lambda _: progress.advance(bar))
            finished = skipped = len(entries) - len(todo)
            if changes.rescored or changes.regraded:
                book.meta["spec_changes"] = changes.as_meta()
                for line in changes.lines():
                    progress.console.print(f"[yellow]spec changed:[/yellow] {escape(line)}")
            progress.update(bar, description=f"grading ({skipped} already done)" if skipped else "grading")
            book.write()
            graded = _grade_all(todo, runner, ctx, progress, bar)
            try:
                for task, result, slot in graded:
                    book.results[task.student], book.slot_of[task.student] = result, slot
                    book.graded.append(task.student)
                    book.write()
                    finished += 1
                    if not console.is_terminal:  # a log: the live bar draws nothing there
                        line = progress_line(finished, len(entries), task.student, result)
                        console.print(line, markup=False, highlight=False, soft_wrap=True)
            finally:
                graded.close()  # on Ctrl-C: stops the runner and its containers first
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        book.meta["time_spent"] = phase_totals([r for s in book.graded if (r := book.results.get(s)) is not None])
        rows = book.write(final=True, interrupted=interrupted)
        shutil.rmtree(book.out / WORK, ignore_errors=True)
        if interrupted:
            done = sum(r["status"] != "missing" for r in rows)
            console.print(
                f"[yellow]interrupted:[/yellow] {done} of {len(rows)} students have results; run the same "
                f"command again to grade the rest"
            )
    return rows, changes


def closing_report(console: Console, rows: list[dict[str, Any]], book: ClassBook, changes: ResumeChanges) -> None:
    """The class's table, then what a TA must know: spec changes, warnings, students left ungraded."""
    console.print(batch_table(rows, book.names))
    for line in changes.lines():
        console.print(f"[yellow]spec changed:[/yellow] {escape(line)}")
    for text in book.meta["warnings"]:
        console.print(f"[bold red]warning:[/bold red] {text}")
    for sid, names in book.meta["duplicate_ids"].items():
        claimants = escape(printable(", ".join(names)))
        console.print(f"[bold red]duplicate id {escape(printable(sid))}:[/bold red] {claimants} (none graded)")
    errors = sum(r["status"] == "error" for r in rows)
    if errors:
        gradebook_csv = book.out / "gradebook.csv"
        console.print(f"[red]{errors} student(s) could not be graded:[/red] see the error column of {gradebook_csv}")
    if book.graded:
        console.print(phase_line(book.meta["time_spent"]))
    files = f"{book.out / 'gradebook.csv'}, {book.out / 'summary.json'}"
    console.print(f"wrote {files} and a folder per student in {book.out}")


def run_batch(batch: BatchOptions, cluster: ClusterRunners | None = None) -> int:
    """`grader batch`: grade every entry of batch.submissions into batch.out. Returns the exit code.

    `cluster`: how a Ray or Slurm backend makes its runner (grader.course.cluster.make_runner), for
    `--backend ray|slurm`."""
    # in a log (no terminal) Rich would wrap the class's table at 80 columns, a word a line
    console = Console() if sys.stdout.isatty() else Console(width=200)
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    assignment = load_assignment(batch.spec, hidden=False if batch.public_only else None)
    batch.out.mkdir(parents=True, exist_ok=True)
    entries = discover(batch.submissions, exclude=[batch.out], nested_exports=batch.nested_exports)
    ctx = batch_context(batch, assignment)
    warnings = [_warn_secret(console)] if ctx.command.secret == DEFAULT_SECRET else []
    with BatchLock(batch.out / ".batch.lock"):
        shutil.rmtree(batch.out / WORK, ignore_errors=True)  # leftovers of a killed run: redone below
        runner, meta = make_runner(ctx, batch, console, cluster)
        meta = {
            "assignment": assignment.assignment.name,
            "version": assignment.assignment.version,
            "device": ctx.device,
            "problems": [p.name for p in ctx.problems],
            **meta,
            "default_secret": ctx.command.secret == DEFAULT_SECRET,
            "warnings": warnings + ([meta["image_warning"]] if "image_warning" in meta else []),
            "started_at": started_at,
            "duplicate_ids": {e.claimed[0]: list(e.claimed[1]) for e in entries if e.claimed},
        }
        book = ClassBook(batch.out, meta["problems"], meta, [e.student for e in entries])
        rows, changes = _grade_class(entries, batch, ctx, runner, book, console)
    closing_report(console, rows, book, changes)
    return 0


def _grade_all(
    todo: list[Task], runner: Runner, ctx: Context, progress: Progress, bar: Any
) -> Generator[tuple[Task, Result, str | None], None, None]:
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

    # beside other gradings on a GPU, a grading that ran out of its time limit or of GPU memory
    # may have been slowed or crowded out by them: it is graded again once the others are done
    shared = ctx.device == "cuda" and runner.parallel and len(runner.slots) > 1 and not hasattr(runner, "start")
    again: list[tuple[Task, list[str]]] = []

    def one(task: Task, slot: str | None, note: str = "") -> tuple[Result, str | None]:
        with lock:
            running[task.student] = time.monotonic()
        describe()
        kept = False
        try:
            try:
                result = runner.run(task, slot)
            except Cancelled:
                raise
            except Exception as exc:  # a bug or an engine failure: an error row, never a stopped batch
                result = ctx.infra_error(task, f"{type(exc).__name__}: {exc}", "none")
            if note:
                result.warnings.append(note)
            elif shared and (why := contention(result)):
                with lock:
                    again.append((task, why))
                kept = True  # its files, for the grading alone
                return result, slot  # committed once graded alone: a batch killed first grades it again
            return commit_or_error(ctx, task, result), slot
        finally:
            with lock:
                running.pop(task.student, None)
            if not kept:
                shutil.rmtree(task.work, ignore_errors=True)
            describe()

    if not runner.parallel:
        for task in todo:
            result, slot = one(task, runner.slots[0])
            progress.advance(bar)
            yield task, result, slot
        return

    order = heaviest_first(todo, ctx.problems) if len(runner.slots) > 1 else todo  # a shorter tail
    for task, result, slot in _in_parallel(order, runner, one, progress, bar):
        if not any(task is waiting for waiting, _ in again):  # else its result stands until graded alone
            yield task, result, slot
    try:
        for task, why in again:  # every other grading has ended: the GPU is this one's
            result, slot = one(task, runner.slots[0], alone_note(why))
            yield task, result, slot
    except BaseException:
        runner.stop()
        raise


def _in_parallel(
    todo: list[Task],
    runner: Runner,
    one: Callable[[Task, str | None], tuple[Result, str | None]],
    progress: Progress,
    bar: Any,
) -> Generator[tuple[Task, Result, str | None], None, None]:
    """`one` for every task on the runner's slots at once; yields (task, result, slot) as each ends."""
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
