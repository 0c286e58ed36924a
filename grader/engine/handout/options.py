"""The handout's command-line options, as a pytest plugin loaded before any conftest.

Registered by a conftest, `--submission` is unknown while pytest first reads its arguments, so
`pytest handout --submission DIR` took DIR for a folder of tests and imported DIR/conftest.py
before the handout's guard and import policy: a submission's own conftest ran unwatched and
the handout said "11 passed" for a GeLU the grader scores 0. pyproject.toml's `addopts` (ours and
the exported handout's) loads this module with `-p`; it imports nothing heavy, so TRITON_INTERPRET
is still unset when it loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import ROOT

DEFAULT_SUBMISSION = ROOT / "student_template"
DTYPES = ("float32", "float16", "bfloat16")


def register(parser: pytest.Parser) -> None:
    """--submission and --dtype, once (a second registration, from the conftest, is skipped)."""
    group = parser.getgroup("handout", "Triton kernels assignment")
    try:
        group.addoption(
            "--submission",
            default=str(DEFAULT_SUBMISSION),
            help="folder with your submission's files (default: student_template)",
        )
        group.addoption("--dtype", default=None, choices=list(DTYPES), help="only cases of this dtype")
    except ValueError:  # already registered: this plugin ran first, as pyproject.toml asks
        pass


def pytest_addoption(parser: pytest.Parser) -> None:
    register(parser)


def submission_folder(config: pytest.Config) -> Path:
    """The --submission folder, or one usage error before any test: a typo once made 12 failures
    saying "... has no gelu.py" instead of one saying the folder is not there."""
    folder = Path(config.getoption("--submission"))
    if not folder.exists():
        raise pytest.UsageError(f"no such folder: {folder} (--submission names your submission's folder)")
    if not folder.is_dir():
        raise pytest.UsageError(f"not a folder: {folder} (--submission names your submission's folder)")
    return folder.resolve()
