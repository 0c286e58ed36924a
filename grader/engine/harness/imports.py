"""What a submission may import: the standard library, its own modules and the allowed packages.

The grading images hold torch, triton, numpy, the allowed packages and the grader's own
dependencies; a student's machine holds whatever they installed. So that a submission importing
something else fails the same way in `pytest handout` and `grader grade` (and not only once it
reaches an image), the same policy object is installed in the handout's process and in every
worker before the submission is imported (grader/engine/harness/serve.py serve, handout/conftest.py).

Only imports made by the submission's own files are judged, from the file of the importing
frame: torch and Triton import sympy, filelock, jinja2 and more on their own, some lazily in the
middle of a call, and those must go through. This is checked at run time rather than by reading
the submission's import statements beforehand, because a guarded `try: import x` / `except
ImportError:` is legal (the refusal is a ModuleNotFoundError, so the fallback runs) and because
`importlib.import_module` has no import statement to read.

Two hooks ask the same question, since neither sees every import alone: a `sys.meta_path` finder
sees every module not loaded yet, `importlib.import_module` included, but a module already in
`sys.modules` (pytest in the handout, pydantic in the worker) never reaches the finders;
`builtins.__import__` sees every import statement, loaded module or not.

A helper named like a standard-library module (`code.py`, `html.py`, `cmd.py`, `pdb.py`,
`resource.py`) is refused when the submission imports it: which of the two an import gets depends
on whether the process loaded the standard one first (pytest loads `pdb`, `cmd` and `code`; a
worker does not), so it resolved differently in `pytest handout` and in the grader (issue 29).
The refusal says to rename the file, in both alike.

A submission can undo both on purpose; the worker's guard reports a replaced `__import__` as
tampering, and the images do not have the refused packages anyway. The policy is about telling
students early and the same way, not a sandbox.
"""

from __future__ import annotations

import builtins
import importlib
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

STDLIB = frozenset(sys.stdlib_module_names) | {"__main__"}
_MACHINERY = (importlib.__file__ or "", __file__)


class RefusedImport(ModuleNotFoundError):
    """An import the grading environment would not have; `except ImportError` still catches it."""


def own_modules(submission: Path) -> frozenset[str]:
    """The names the submission's folder itself provides: its .py files and its folders."""
    try:
        entries = list(submission.iterdir())
    except OSError:
        return frozenset()
    return frozenset(p.stem if p.suffix == ".py" else p.name for p in entries if p.suffix == ".py" or p.is_dir())


class ImportPolicy:
    """Refuses top-level imports from the submission's files of anything not stdlib, allowed or its own."""

    def __init__(self, submission: Path, allowed: Iterable[str]) -> None:
        self.submission = submission
        self.prefixes = tuple({str(submission) + os.sep, str(submission.resolve()) + os.sep})
        self.allowed = tuple(sorted(allowed))
        own = own_modules(submission)
        self.permitted = STDLIB | frozenset(self.allowed) | own
        #: its own files named like standard-library modules: which one an import gets is not defined
        self.shadowing = (own & STDLIB) - {"__main__"}
        self._original_import: Callable[..., Any] | None = None

    def _where(self, frame: FrameType) -> str:
        where = frame.f_code.co_filename
        for prefix in self.prefixes:
            where = where.removeprefix(prefix)
        return where

    def message(self, module: str, frame: FrameType) -> str:
        where = self._where(frame)
        return (
            f"No module named {module!r} in the grading environment ({where}, line {frame.f_lineno} imports it). "
            f"A submission may import only Python's standard library, its own modules and {', '.join(self.allowed)} "
            "(assignment.toml, [environment] allowed_imports)"
        )

    def check(self, name: str, level: int, frame: FrameType | None) -> None:
        """Raise RefusedImport when `frame`, a frame of the submission's files, imports a refused package."""
        if level or frame is None or not frame.f_code.co_filename.startswith(self.prefixes):
            return
        top = name.partition(".")[0]
        if top in self.shadowing:
            raise RefusedImport(
                f"{top!r} is both a file of the submission and a module of Python's standard library, so which "
                f"one `import {top}` gets depends on what was imported before it, in `pytest handout` and in the "
                f"grader alike: rename the submission's {top} (imported at line {frame.f_lineno} of "
                f"{self._where(frame)})",
                name=top,
            )
        if top and top not in self.permitted:
            raise RefusedImport(self.message(top, frame), name=top)

    # sys.meta_path: consulted for modules not loaded yet -------------------------------------
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if path is None:  # a top-level name; submodules follow their package
            self.check(fullname, 0, _importer(sys._getframe(1)))
        return None  # never finds anything itself: the other finders load what is allowed

    def install(self) -> ImportPolicy:
        original = builtins.__import__

        def __import__(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:  # noqa: A001, A002
            self.check(name, level, sys._getframe(1))
            return original(name, globals, locals, fromlist, level)

        self._original_import = original
        builtins.__import__ = __import__
        sys.meta_path.insert(0, self)
        return self

    def uninstall(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        if self._original_import is not None:
            builtins.__import__ = self._original_import
            self._original_import = None


def _importer(frame: FrameType | None) -> FrameType | None:
    """The first frame outside the import machinery (importlib, this module): the code importing."""
    while frame is not None and (
        frame.f_code.co_filename.startswith("<frozen importlib") or frame.f_code.co_filename in _MACHINERY
    ):
        frame = frame.f_back
    return frame


def install(submission: Path, allowed: Iterable[str]) -> ImportPolicy:
    """Judge every later import made from `submission`'s files (call before importing any of them)."""
    return ImportPolicy(submission, allowed).install()
