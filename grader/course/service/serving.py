"""`grader serve` put together: the database, the grading setup, the queue, the app, uvicorn.

The secret the gradings draw their inputs from is GRADER_SECRET, or --secret-file, or one drawn
at the first start and kept in the files folder (mode 0600), so a restarted server grades with
the same secret. The workers of every grading are kept from the database, its journal and the
files folder (GRADER_HIDE, as `grader batch` hides its results).
"""

from __future__ import annotations

import copy
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.config import LOGGING_CONFIG

from grader.course.batch.concurrency import jobs_at_once
from grader.course.leaderboard.names import SALT_ENV
from grader.course.service import db
from grader.course.service.app import Server
from grader.course.service.connections import GuardedH11Protocol
from grader.course.service.jobs import GradingSetup
from grader.course.service.quotas import effective
from grader.course.service.scheduler import LOG, Scheduler
from grader.engine.assignment.load import load_assignment
from grader.engine.orchestrator.launch import resolve_device
from grader.engine.spec.model import DEFAULT_SPEC

#: the shortest pseudonym key taken from the environment
MIN_ALIAS_SECRET = 16
#: uvicorn's bounds: connections at once, and how long an idle keep-alive connection is kept
MAX_CONNECTIONS = 200
KEEP_ALIVE_S = 5


@dataclass
class ServeOptions:
    db: str
    port: int = 8000
    host: str = "127.0.0.1"
    backend: str = "local"
    device: str = "auto"
    quota: int | None = None
    jobs: int | None = None  # None: 1 on a CPU, the batch's `--jobs auto` rule on a GPU
    spec: Path = DEFAULT_SPEC
    files: str | None = None
    secret_file: str | None = None
    timeout: float | None = None
    worker_user: str = "nobody"
    kernel_cache: Path | None = None
    cluster: dict[str, object] = field(default_factory=dict)


def kept_secret(path: Path) -> str:
    """A random secret drawn once and kept at `path` (mode 0600), so a restart keeps it."""
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32))
    return path.read_text().strip()


def server_secret(files: Path, secret_file: str | None) -> str:
    if secret_file:
        return Path(secret_file).read_text().strip()
    if os.environ.get("GRADER_SECRET"):
        return os.environ["GRADER_SECRET"]
    return kept_secret(files / "secret")


def alias_secret(files: Path) -> str:
    """The leaderboard's pseudonym key: the staff's GRADER_LEADERBOARD_SALT (as `grader batch` and
    `grader leaderboard` read it, so reports show the same aliases), else one drawn and kept.
    A short one is refused: anyone with the class list could try every guess."""
    given = os.environ.get(SALT_ENV, "")
    if given and len(given) < MIN_ALIAS_SECRET:
        raise RuntimeError(
            f"{SALT_ENV} has {len(given)} characters: a pseudonym key needs at least {MIN_ALIAS_SECRET} "
            "(a guessable one lets anyone with the class list undo the aliases); unset it to have one drawn"
        )
    return given or kept_secret(files / "leaderboard-secret")


def hidden(options: ServeOptions, files: Path) -> list[Path]:
    paths = [files]
    if "://" not in options.db:
        base = Path(options.db).expanduser().resolve()
        paths += [base, base.with_name(base.name + "-wal"), base.with_name(base.name + "-shm")]
    if options.secret_file:
        paths.append(Path(options.secret_file).resolve())
    return paths


def make_server(options: ServeOptions, start_queue: bool = True) -> Server:
    files = db.files_folder(options.db, options.files)
    files.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(files, 0o700)  # other users, the workers included, never read a stored job
    engine = db.open_db(options.db)
    assignment = load_assignment(options.spec, hidden=False)
    device = resolve_device(options.device)
    setup = GradingSetup(
        spec=Path(options.spec).resolve(),
        device=device,
        secret=server_secret(files, options.secret_file),
        files=files,
        hide=hidden(options, files),
        backend=options.backend,
        jobs=jobs_at_once(device, options.jobs),
        timeout=options.timeout,
        worker_user=options.worker_user,
        kernel_cache=options.kernel_cache,
        cluster=options.cluster,
    )
    server = Server(engine, assignment, device, effective(assignment.service, options.quota))  # type: ignore[arg-type]
    server.alias_secret = alias_secret(files)
    if start_queue:
        server.scheduler = Scheduler(engine, setup)
    return server


def log_config() -> dict[str, Any]:
    """uvicorn's logging, with the queue's lines (grader.serve: each grading's start and end) in
    the same format beside its request lines."""
    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"][LOG.name] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def uvicorn_config(app: object, host: str, port: int, log_level: str = "info") -> uvicorn.Config:
    """uvicorn's settings for the service: `grader serve` and the tests that attack it use these."""
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=log_level,
        log_config=log_config(),
        http=GuardedH11Protocol,  # a per-address cap and a header time-out (connections.py)
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=KEEP_ALIVE_S,
        server_header=False,
    )


def serve(options: ServeOptions) -> None:
    from grader.course.service.asgi import build_app

    app = build_app(make_server(options))
    try:
        uvicorn.Server(uvicorn_config(app, options.host, options.port)).run()
    except KeyboardInterrupt:
        # Ctrl-C is how a server is stopped: uvicorn has shut down (the queue stopped, the gradings
        # in flight back in it for the next start) and hands the signal on; that is no error
        LOG.info("stopped; the gradings in flight are queued for the next start")
