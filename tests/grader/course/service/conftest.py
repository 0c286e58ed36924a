"""The database the service's tests use: a SQLite file, the default `grader serve --db` takes.

test_postgres.py gives the same name a fresh PostgreSQL database and collects some of these
tests again, so that one test function checks both backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def database(tmp_path: Path) -> str:
    return str(tmp_path / "grades.sqlite")
