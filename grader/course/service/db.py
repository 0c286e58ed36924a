"""The service's tables, and the migrations that bring an older database up to them.

SQLite is the default (a file beside the course's grades), PostgreSQL a URL away (psycopg 3, the
serve extra's driver): both through SQLAlchemy Core, with times as Unix seconds (floats) so that
neither needs time-zone support.
The schema's version is a row of `meta`; `open_db` creates a new database at the latest version,
runs the missing steps of MIGRATIONS on an older one, and refuses one a newer grader made.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
    create_engine,
    event,
    inspect,
    select,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, OperationalError

SCHEMA_VERSION = 1

metadata = MetaData()


class Clipped(TypeDecorator[str]):
    """A VARCHAR(n) whose values are cut to n: PostgreSQL refuses a longer one where SQLite keeps it,
    and a roster's overlong name should be neither a crash nor differ between the two."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: object) -> str | None:
        return None if value is None else value[: self.impl_instance.length]  # type: ignore[attr-defined]  # a String


meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

#: a student of the roster, or a member of staff (role "staff"); the token is stored as its SHA-256
people = Table(
    "people",
    metadata,
    Column("id", String(100), primary_key=True),
    Column("name", Clipped(200), nullable=False, default=""),
    Column("email", Clipped(200), nullable=False, default=""),
    Column("role", String(16), nullable=False, default="student"),
    Column("token_hash", String(64), unique=True, nullable=True),
    Column("revoked_at", Float, nullable=True),
    Column("created_at", Float, nullable=False),
)

#: one submission, from upload to result; staff re-runs are jobs too (rerun_of names the original)
jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("person_id", String(100), ForeignKey("people.id"), nullable=False, index=True),
    Column("mode", String(16), nullable=False),
    Column("problems", String(400), nullable=False, default=""),  # comma-separated; "" for all
    Column("state", String(16), nullable=False, index=True),  # queued, running, graded, error
    Column("archive", LargeBinary, nullable=False),
    Column("archive_name", String(200), nullable=False),
    Column("archive_sha256", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("started_at", Float, nullable=True),
    Column("finished_at", Float, nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("late", Boolean, nullable=False, default=False),
    Column("result", Text, nullable=True),  # the Result record's JSON
    Column("error", Text, nullable=False, default=""),
    Column("rerun_of", Integer, ForeignKey("jobs.id"), nullable=True),
    Column("secret", Text, nullable=True),  # a staff re-run's own secret; None: the server's
    Column("pid", Integer, nullable=True),  # the running `grader grade` child (its process group)
)


def _v1(conn: Connection) -> None:
    metadata.create_all(conn)


#: step n brings version n-1 to version n (step 1 creates the tables)
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1}


class SchemaError(RuntimeError):
    """The database is not one this grader can use (made by a newer one, or not the service's)."""


#: what to install for a driver SQLAlchemy could not import (by the module's name)
DRIVER_PACKAGES = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary", "pg8000": "pg8000"}


def database_url(db: str) -> str:
    """A path (the SQLite default) or a SQLAlchemy URL; a plain postgresql:// URL (as psql and a
    course's TA write it) gets psycopg 3, the driver the serve extra installs."""
    for plain in ("postgresql://", "postgres://"):
        if db.startswith(plain):
            return "postgresql+psycopg://" + db[len(plain) :]
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).expanduser().resolve()}"


def shown(db: str) -> str:
    """`db` as errors and logs may print it: without its password."""
    if "://" not in db:
        return db
    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:
        return db.split("://", 1)[0] + "://..."


def files_folder(db: str, given: str | None = None) -> Path:
    """Where the service keeps scratch files (unpacked jobs, the secret): beside a SQLite file."""
    if given:
        return Path(given).resolve()
    if "://" in db:
        return Path("grader-service-files").resolve()
    path = Path(db).expanduser().resolve()
    return path.with_name(path.name + ".files")


def _sqlite_pragmas(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (the pages) never wait for the scheduler's writes
    cursor.execute("PRAGMA synchronous=FULL")  # a committed job survives a power cut, not only a kill
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def open_db(db: str) -> Engine:
    """The engine for `db`, its schema created or migrated to SCHEMA_VERSION."""
    url = database_url(db)
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///") :])
        path.parent.mkdir(parents=True, exist_ok=True)
        # tokens' hashes, archives and staff re-runs' secrets: the server's own (its journal files inherit the mode)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        path.chmod(0o600)
    engine = _engine(url, shown(db))
    try:
        with engine.begin() as conn:
            version = current_version(conn)
            if version > SCHEMA_VERSION:
                raise SchemaError(
                    f"{shown(db)}: schema version {version}, newer than this grader's {SCHEMA_VERSION}: "
                    "update the grader"
                )
            for step in range(version + 1, SCHEMA_VERSION + 1):
                MIGRATIONS[step](conn)
                set_meta(conn, "schema_version", str(step))
    except OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig or exc).strip().splitlines()[0]
        raise RuntimeError(f"{shown(db)}: cannot open the database: {reason}") from None
    except BaseException:
        engine.dispose()
        raise
    return engine


def _engine(url: str, name: str) -> Engine:
    """The engine, or a RuntimeError naming the package of a driver that is not installed."""
    try:
        # pre_ping: a pooled connection that a restarted database server dropped is replaced, not raised
        engine = create_engine(url, future=True, pool_pre_ping=True)
    except ImportError as exc:
        module = (exc.name or "").split(".")[0]
        package = DRIVER_PACKAGES.get(module, module)
        raise RuntimeError(
            f"{name}: its driver {module!r} is not installed: pip install '{package}' "
            "(for PostgreSQL, the serve extra has it: pip install -e '.[serve]')"
        ) from None
    except ArgumentError as exc:
        raise RuntimeError(f"{name}: not a database URL SQLAlchemy knows: {exc}") from None
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def current_version(conn: Connection) -> int:
    tables = set(inspect(conn).get_table_names())
    if "meta" not in tables:
        if tables:
            raise SchemaError(f"the database holds tables ({', '.join(sorted(tables))}) but no service schema")
        return 0
    row = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).first()
    return int(row[0]) if row else 0


def get_meta(conn: Connection, key: str) -> str | None:
    row = conn.execute(select(meta.c.value).where(meta.c.key == key)).first()
    return None if row is None else str(row[0])


def set_meta(conn: Connection, key: str, value: str) -> None:
    if get_meta(conn, key) is None:
        conn.execute(meta.insert().values(key=key, value=value))
    else:
        conn.execute(meta.update().where(meta.c.key == key).values(value=value))
