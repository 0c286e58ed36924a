"""Tokens: one secret per student of the roster (and per member of staff), stored as a hash.

A token is 32 random bytes (URL-safe text), so one SHA-256 of it is as good as a slow password
hash: nothing can be guessed from the stored value. The plain token is shown once, in the CSV
`grader tokens` writes; issuing again replaces it (the old one stops working), and revoking is
one command.
"""

from __future__ import annotations

import csv
import hashlib
import io
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine

from grader.course.batch.discovery import student_id
from grader.course.service.db import people

PREFIX = "gks_"  # a token found in a log or a paste names what it is for


class RosterError(ValueError):
    """The roster file cannot be read; the message names the line."""


@dataclass(frozen=True)
class Person:
    id: str
    name: str
    email: str
    role: str = "student"

    @property
    def staff(self) -> bool:
        return self.role == "staff"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def new_token() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def read_roster(path: Path) -> list[Person]:
    """Students from a CSV with a header naming an id column (student_id, student, sid, id or
    email), and optionally name and email columns."""
    try:
        rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise RosterError(f"{path}: cannot be read as CSV: {exc}") from None
    if not rows:
        raise RosterError(f"{path}: no students (expected a header line, then one line per student)")
    header = {k.strip().lower(): k for k in rows[0] if k}
    id_key = next((header[k] for k in ("student_id", "student", "sid", "id", "email") if k in header), None)
    if id_key is None:
        raise RosterError(f"{path}: the header names no id column (student_id, student, sid, id or email)")
    students: dict[str, Person] = {}
    for n, row in enumerate(rows, start=2):
        raw = (row.get(id_key) or "").strip()
        if not raw:
            raise RosterError(f"{path}: line {n} has no student id")
        sid = student_id(raw)
        if sid in students:
            raise RosterError(f"{path}: line {n}: student id {sid!r} appears twice")
        name = (row.get(header.get("name", ""), "") or "").strip()
        email = (row.get(header.get("email", ""), "") or "").strip()
        students[sid] = Person(sid, name, email)
    return list(students.values())


def issue(engine: Engine, person: Person) -> str:
    """A new token for `person` (added if new); any token they had stops working."""
    token = new_token()
    now = time.time()
    with engine.begin() as conn:
        exists = conn.execute(select(people.c.id).where(people.c.id == person.id)).first()
        values = {
            "name": person.name,
            "email": person.email,
            "role": person.role,
            "token_hash": hash_token(token),
            "revoked_at": None,
        }
        if exists:
            conn.execute(people.update().where(people.c.id == person.id).values(**values))
        else:
            conn.execute(people.insert().values(id=person.id, created_at=now, **values))
    return token


def revoke(engine: Engine, person_id: str) -> bool:
    """Their token stops working at once; their submissions stay. False: no such person."""
    with engine.begin() as conn:
        done = conn.execute(
            people.update().where(people.c.id == person_id).values(token_hash=None, revoked_at=time.time())
        )
    return bool(done.rowcount)


def has_token(engine: Engine, person_id: str) -> bool:
    with engine.connect() as conn:
        row = conn.execute(select(people.c.token_hash).where(people.c.id == person_id)).first()
    return row is not None and row[0] is not None


def authenticate(engine: Engine, token: str | None) -> Person | None:
    """Who holds `token`, or None (no token, a wrong one, a revoked one)."""
    if not token or len(token) > 200:
        return None
    with engine.connect() as conn:
        row = conn.execute(
            select(people.c.id, people.c.name, people.c.email, people.c.role).where(
                people.c.token_hash == hash_token(token), people.c.revoked_at.is_(None)
            )
        ).first()
    return None if row is None else Person(row.id, row.name, row.email, row.role)


def write_tokens(path: Path, issued: list[tuple[Person, str]]) -> None:
    """The CSV staff hand out (one line per person); readable by its owner only."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["student_id", "name", "email", "role", "token"])
    for person, token in issued:
        writer.writerow([person.id, person.name, person.email, person.role, token])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(buf.getvalue(), encoding="utf-8")
