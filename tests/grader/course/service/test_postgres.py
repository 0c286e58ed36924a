"""The service's database on a real PostgreSQL: `grader serve --db postgresql://...`.

One throwaway cluster for the session (initdb, then pg_ctl with its socket in a temporary folder
and no TCP port), stopped and deleted after the last test, and a fresh database for each test.
The queue's tests of test_store.py and one flow of test_api.py are collected here again: their
`database` fixture is this module's, so the same test functions check both backends.

Skipped, with the reason, where PostgreSQL's server binaries or psycopg are missing;
GRADER_TEST_POSTGRES=required (CI sets it, .ci/run) makes that a failure instead.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.course.service import db, store, tokens
from tests.grader.course.service import test_api, test_store

# the same tests as on SQLite; this module's `database` fixture gives them PostgreSQL
test_the_queue_takes_students_in_turn = test_store.test_the_queue_takes_students_in_turn
test_one_running_job_per_student = test_store.test_one_running_job_per_student
test_a_restart_requeues_what_was_running_with_nothing_lost = (
    test_store.test_a_restart_requeues_what_was_running_with_nothing_lost
)
test_a_job_a_killed_server_was_grading_is_graded_after_a_restart = (
    test_store.test_a_job_a_killed_server_was_grading_is_graded_after_a_restart
)
test_a_new_database_gets_the_schema_and_opening_it_again_changes_nothing = (
    test_store.test_a_new_database_gets_the_schema_and_opening_it_again_changes_nothing
)
test_a_database_from_a_newer_grader_is_refused = test_store.test_a_database_from_a_newer_grader_is_refused
test_a_database_of_something_else_is_refused = test_store.test_a_database_of_something_else_is_refused
test_an_overlong_name_from_a_roster_is_cut_to_its_column = (
    test_store.test_an_overlong_name_from_a_roster_is_cut_to_its_column
)
test_a_submission_is_queued_graded_and_listed = test_api.test_a_submission_is_queued_graded_and_listed

USER = "grader"  # the cluster's superuser; trust authentication on its socket, nothing else listens


def _unavailable(reason: str) -> None:
    if os.environ.get("GRADER_TEST_POSTGRES") == "required":
        pytest.fail(f"PostgreSQL tests required (GRADER_TEST_POSTGRES) but {reason}")
    pytest.skip(reason)


def _server_binary(name: str) -> str | None:
    """On PATH, or in the newest of Debian's /usr/lib/postgresql/N/bin (not on PATH by default)."""
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda f: int(f.split("/")[-2]), reverse=True)
    return shutil.which(name) or next((f"{f}/{name}" for f in folders if os.access(f"{f}/{name}", os.X_OK)), None)


def _as_owner() -> list[str]:
    """initdb and postgres refuse root: as root, the cluster runs as nobody."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        _unavailable("running as root, and setpriv (util-linux) is missing to start PostgreSQL as nobody")
    nobody = pwd.getpwnam("nobody")
    return ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups", "--"]


def _run(command: list[str], folder: Path) -> None:
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        log = folder / "server.log"
        detail = done.stdout + done.stderr + (log.read_text() if log.exists() else "")
        raise AssertionError(f"{' '.join(command)} failed ({done.returncode}):\n{detail}")


def _stop(data: Path, pg_ctl: str, owner: list[str], folder: Path) -> None:
    """pg_ctl's immediate stop; if that fails, the postmaster's process group is killed (nothing outlives the tests)."""
    pidfile = data / "postmaster.pid"
    if not pidfile.exists():
        return
    done = subprocess.run([*owner, pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], cwd=folder, timeout=60)
    if done.returncode != 0 and pidfile.exists():
        pid = int(pidfile.read_text().split()[0])
        try:
            os.killpg(pid, signal.SIGKILL)  # pg_ctl starts the postmaster in a session of its own
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def postgres() -> Iterator[Path]:
    """A PostgreSQL cluster for the session: the folder of its socket (and of its data and log)."""
    initdb, pg_ctl = _server_binary("initdb"), _server_binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        _unavailable("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[serve]')")
    owner = _as_owner()
    # not pytest's tmp_path: its base folder is private to the user running the tests, not the cluster's
    folder = Path(tempfile.mkdtemp(prefix="grader-pg-"))
    data = folder / "data"
    try:
        if owner:
            nobody = pwd.getpwnam("nobody")
            os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        _run([*owner, initdb, "-D", str(data), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-locale", "-N"], folder)
        with open(data / "postgresql.conf", "a") as conf:
            # a socket in the folder and no TCP port; durability is not what these tests check
            conf.write(f"\nunix_socket_directories = '{folder}'\nlisten_addresses = ''\nfsync = off\n")
        _run([*owner, pg_ctl, "-D", str(data), "-l", str(folder / "server.log"), "-w", "-t", "60", "start"], folder)
        yield folder
    finally:
        _stop(data, pg_ctl, owner, folder)  # type: ignore[arg-type]
        shutil.rmtree(folder, ignore_errors=True)


_numbers = itertools.count(1)


@pytest.fixture
def database(postgres: Path) -> str:
    """A fresh, empty database of the session's cluster, as a TA writes its URL (no driver named)."""
    import psycopg

    name = f"test_{next(_numbers)}"
    with psycopg.connect(f"host={postgres} user={USER} dbname=postgres", autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return f"postgresql://{USER}@/{name}?host={postgres}"


def test_a_plain_postgresql_url_gets_the_psycopg_driver() -> None:
    assert db.database_url("postgresql://ta@db.example.edu/grades") == "postgresql+psycopg://ta@db.example.edu/grades"
    assert db.database_url("postgres://ta@h/g") == "postgresql+psycopg://ta@h/g"
    assert db.database_url("postgresql+psycopg2://ta@h/g") == "postgresql+psycopg2://ta@h/g"  # a named one is kept


def test_a_missing_driver_is_named_with_its_package_and_no_password() -> None:
    with pytest.raises(RuntimeError) as caught:
        db.open_db("postgresql+pg8000://ta:hunter2@db.example.edu/grades")
    message = str(caught.value)
    assert "pip install 'pg8000'" in message and "db.example.edu/grades" in message
    assert "hunter2" not in message


def test_a_database_that_cannot_be_reached_is_a_clear_error(postgres: Path) -> None:
    with pytest.raises(RuntimeError, match=r"postgresql://grader:\*\*\*@/absent\?host=.*: cannot open the database"):
        db.open_db(f"postgresql://grader:hunter2@/absent?host={postgres}")


def test_two_servers_on_one_database_never_claim_the_same_job(database: str) -> None:
    first = db.open_db(database)
    students = [f"s{n}" for n in range(16)]
    for who in students:
        tokens.issue(first, tokens.Person(who, who, ""))
        store.add_job(first, who, "test", b"x", "a.tar.gz")
    engines = [first, db.open_db(database)]
    claimed: list[list[int]] = [[], []]

    def claim(n: int) -> None:
        for _ in range(200):
            if (job := store.claim_next(engines[n])) is not None:
                claimed[n].append(job.id)
            elif not store.all_jobs(engines[n], ("queued",)):
                return

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    ids = claimed[0] + claimed[1]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == len(students)
    for engine in engines:
        engine.dispose()
