"""TOML for every Python the grader runs on: the standard library's tomllib (3.11+), else tomli.

Gradescope's default autograder image is Ubuntu 22.04, whose python3 is 3.10 (no tomllib); its
package installs tomli there (grader/course/gradescope_scripts.py). tomli is tomllib's origin and has
the same two names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.engine.spec.model import SpecError

try:
    import tomllib as _toml  # novermin: guarded, tomli below on 3.10
except ModuleNotFoundError:  # Python 3.10
    import tomli as _toml  # type: ignore[no-redef]

loads = _toml.loads
TOMLDecodeError = _toml.TOMLDecodeError

__all__ = ["TOMLDecodeError", "loads", "read"]


def read(path: Path) -> dict[str, Any]:
    """A spec file's tables; SpecError says what is wrong with the file, never a traceback."""
    try:
        return loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError(f"{path}: assignment file not found") from None
    except TOMLDecodeError as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{path}: not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read: {exc.strerror or exc}") from None
