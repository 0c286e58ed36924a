"""Loading a Python file as a module: submissions, the staff reference, and the tests' fixtures.

One loader for every side, so a submission is imported the same way in the worker, in
`pytest handout` and wherever the reference is timed: its folder goes first on `sys.path` (its
helper modules import as they would next to it), and the module is registered under its own name
before it runs (dataclasses and pickling look it up there).
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

_fresh = itertools.count()


def load_file(path: Path, name: str | None = None, *, on_path: bool = False) -> ModuleType:
    """Execute `path` as a new module called `name` (a fresh private name if None).

    `on_path` puts the file's folder first on `sys.path`, as running it from there would.
    """
    name = name or f"_loaded_{path.stem}_{next(_fresh)}"
    if on_path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_function(folder: Path, module: str, function: str) -> Callable[..., Any]:
    """`module.py` of a submission (or of the reference) imported from `folder`, and its `function`."""
    path = folder / f"{module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"the submission has no {module}.py")
    fn = getattr(load_file(path, module, on_path=True), function, None)
    if fn is None:
        raise AttributeError(f"{module}.py defines no {function}")
    if not callable(fn):
        raise TypeError(f"{module}.{function} is not callable")
    return fn
