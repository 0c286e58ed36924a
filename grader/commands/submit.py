"""`grader submit SUBMISSION --server URL --token TOKEN`: the public tests here, then the course's queue.

Exit codes: 0 graded and every problem passed (or a final, graded and waiting for publication),
1 graded with failures or not gradable, 2 not submitted (refused, unreachable, a bad folder).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from grader.engine.spec.model import DEFAULT_SPEC, MODES


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("submit", help="submit to the course's grading service and wait for the result")
    p.add_argument(
        "submission", nargs="?", default="student_template", help="your submission folder (default: student_template)"
    )
    add_server_arguments(p)
    p.add_argument("--mode", choices=MODES, default="test", help="test (default), benchmark, profile or final")
    p.add_argument("--problems", default=None, help="comma-separated problems to grade (default: all)")
    p.add_argument("--no-tests", action="store_true", help="skip the public tests on this machine")
    p.add_argument("--no-wait", action="store_true", help="submit and return; `grader submissions` shows it later")
    p.add_argument("--spec", type=Path, default=DEFAULT_SPEC, help="assignment.toml")
    p.set_defaults(func=run)


def add_server_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--server", default=os.environ.get("GRADER_SERVER"), help="the service's URL ($GRADER_SERVER)")
    p.add_argument(
        "--token",
        default=os.environ.get("GRADER_TOKEN"),
        help="your token ($GRADER_TOKEN; prefer it: a command line is visible to other users)",
    )


def client_from(args: argparse.Namespace, console: Console):  # type: ignore[no-untyped-def]
    from grader.course.service.client import Client

    if not args.server or not args.token:
        console.print("[red]error:[/red] give --server URL and --token TOKEN (or GRADER_SERVER and GRADER_TOKEN)")
        return None
    return Client(args.server, args.token.strip())


def run(args: argparse.Namespace) -> int:
    from grader.course.pack import PackError, build_archive, run_public_tests
    from grader.course.precheck import check_submission, spec_modules
    from grader.course.service.client import ServerError

    console = Console(stderr=True, soft_wrap=True)
    client = client_from(args, console)
    if client is None:
        return 2
    folder = Path(args.submission)
    named = spec_modules(args.spec)  # no PyTorch yet: the checks below take milliseconds
    modules = [module for _, module in named]
    problems = args.problems.split(",") if args.problems else None
    chosen = [name for name, _ in named if not problems or name in problems]
    try:  # before any test or upload: a typo or a SyntaxError costs neither time nor quota
        check_submission(folder, modules)
    except (PackError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    if not args.no_tests:
        with console.status(f"running the public tests on {folder} (pytest handout)"):
            tests = run_public_tests(folder, chosen)
        colour = "green" if tests.passed else "yellow"
        console.print(
            f"[{colour}]public tests {'passed' if tests.passed else 'did not all pass'}:[/] {escape(tests.summary)}"
        )
    try:
        with tempfile.TemporaryDirectory(prefix="grader-submit-") as scratch:
            archive = Path(scratch) / "submission.tar.gz"
            build_archive(folder, archive, modules)
            view = client.submit(archive.read_bytes(), archive.name, args.mode, problems)
    except (PackError, OSError) as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    except ServerError as exc:
        console.print(f"[red]not submitted:[/red] {escape(str(exc))}")
        return 2
    console.print(f"submitted as #{view['id']} ({args.mode}); `grader submissions` lists it")
    if args.no_wait:
        return 0
    try:
        view = wait(client, view["id"], console)
    except ServerError as exc:
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        return 2
    return show(view, client.server, console)


def wait(client: Any, job_id: int, console: Console) -> dict[str, Any]:
    started = time.monotonic()
    with console.status("submitted") as status:

        def progress(view: dict[str, Any]) -> None:
            waited = f"{time.monotonic() - started:.0f} s"
            if view["state"] == "queued":
                status.update(f"#{job_id} queued, {view.get('ahead', 0)} ahead ({waited})")
            elif view["state"] == "running":
                status.update(f"#{job_id} grading ({waited})")

        return client.wait(job_id, progress)  # type: ignore[no-any-return]


def show(view: dict[str, Any], server: str, console: Console) -> int:
    """The result as `grader grade` prints it; the exit code says whether everything passed."""
    from grader.engine.records.console import first_reasons, print_profiles, print_result, print_timings
    from grader.engine.records.model import Result

    if view.get("withheld"):
        console.print(f"#{view['id']} {view['state']}: {escape(view['withheld'])}")
        return 0 if view["state"] in ("graded", "received") else 1
    if view.get("result") is None:
        console.print(f"[red]#{view['id']} could not be graded:[/red] {escape(view.get('error') or view['state'])}")
        return 1
    result = Result.model_validate(view["result"])
    out = Console()
    print_result(result, out)
    if view["mode"] == "benchmark":
        print_timings(result, out)
    if view["mode"] == "profile":
        print_profiles(result, out)
    for line in first_reasons(result):
        console.print(escape(line))
    if result.status == "error":
        console.print(f"[red]not graded:[/red] {escape(result.error.splitlines()[0] if result.error else '')}")
    console.print(f"report: {escape(server.rstrip('/'))}/me/submissions/{view['id']} (log in with your token)")
    passed = result.status == "graded" and all(p.status == "passed" for p in result.problems)
    return 0 if passed else 1
