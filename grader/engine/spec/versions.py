"""The local torch, Triton and numpy against the grading environment, and what version errors mean.

A student testing with another Triton than the grader's sees other errors than the grade will
show (Triton 3.9 removed block pointers; 3.6, the grading version, has them), so `pytest handout`
says up front when the versions differ, and the handout and the worker both add a hint to the
errors that only a different Triton raises.
"""

from __future__ import annotations

import os
import platform
import re
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from packaging.specifiers import SpecifierSet
from pydantic import ValidationError

from grader.engine.spec import toml
from grader.engine.spec.model import DEFAULT_SPEC, Environment, SpecError, model_errors

WRITEUP = 'assignment/README.md, "Triton versions"'
#: the spec's environment, handed to each worker: the worker's namespace hides assignment/
ENV_VAR = "GRADER_ENVIRONMENT"


def worker_env(env: Environment) -> dict[str, str]:
    return {ENV_VAR: env.model_dump_json()}


@cache
def graded() -> Environment:
    """The environment being graded for: the one the orchestrator handed over, else the spec's."""
    handed = os.environ.get(ENV_VAR)
    return Environment.model_validate_json(handed) if handed else load_environment()


def installed(name: str) -> str | None:
    """The installed version without its local build tag (2.11.0+cu130 is 2.11.0), or None."""
    try:
        return version(name).split("+")[0]
    except PackageNotFoundError:
        return None


#: what the grader itself imports beyond the grading environment (pyproject.toml's other
#: dependencies): the handout export and the Gradescope package install these too
GRADER_DEPENDENCIES = (
    "packaging>=23",
    "pydantic>=2.6",
    "jinja2>=3.1",
    "rich>=13",
    "pytest>=8",
    "pytest-benchmark>=4",
    "pyyaml>=6",
    "tomli>=2; python_version < '3.11'",
)


def requirements(env: Environment) -> list[str]:
    """The environment as pip requirements: what every install of the grader or the handout pins."""
    return [
        f"torch=={env.torch}",
        f"triton=={env.triton}",
        f"numpy{env.numpy}",
        *(f"{n}=={v}" for n, v in env.packages.items()),
    ]


def install_command(env: Environment) -> str:
    return "pip install " + " ".join(f"'{r}'" if "<" in r or ">" in r else r for r in requirements(env))


def differences(env: Environment) -> list[str]:
    """One line per package (and Python) whose local version is not the one graded with."""
    found = []
    for name, want in (("torch", env.torch), ("triton", env.triton)):
        have = installed(name)
        if have != want:
            found.append(f"{name} {have or 'is not installed'} here, {want} in grading")
    have_numpy = installed("numpy")
    if have_numpy is None or have_numpy not in SpecifierSet(env.numpy):
        found.append(f"numpy {have_numpy or 'is not installed'} here, numpy{env.numpy} in grading")
    if platform.python_version() not in SpecifierSet(env.python):
        found.append(f"Python {platform.python_version()} here, Python{env.python} in grading")
    return found


def hint(message: str, env: Environment | None = None) -> str | None:
    """What to do about an error that only a Triton other than the grading one raises, or None."""
    env = env or graded()
    here = installed("triton") or "?"
    if "Block pointers have been removed" in message:
        return (
            f"Triton {here} (the one running here) has no block pointers: tl.make_block_ptr and tl.advance were "
            f"removed in Triton 3.9. The grader runs Triton {env.triton}, which has them. Test with the grading "
            f"versions ({install_command(env)}), or write the loads with tensor descriptors or plain pointers "
            f"and masks, which every version runs ({WRITEUP})."
        )
    removed = re.search(r"unexpected keyword argument '(boundary_check|padding_option)'", message)
    if removed:
        return (
            f"Triton {here} (the one running here) dropped {removed.group(1)} from tl.load/tl.store (Triton 3.9, "
            f"with block pointers). The grader runs Triton {env.triton}. Test with the grading versions "
            f"({install_command(env)}), or use masks / tensor descriptors ({WRITEUP})."
        )
    if "active drivers" in message or "'TargetOnly' object has no attribute" in message:
        return (
            "This code asks the GPU driver for something Triton's interpreter on a CPU does not have (there the "
            "driver answers the device, the graded GPU's target and properties, and f.warmup(...)'s registers and "
            "shared memory, as Triton's tutorials use them; it launches and times nothing): it runs on a GPU only. "
            "Keep it behind `if torch.cuda.is_available():` with a plain f[grid](...) launch otherwise "
            '(assignment/README.md, "On a CPU: Triton\'s interpreter").'
        )
    missing = re.search(r"module 'triton\.language' has no attribute '(\w+)'", message)
    if missing:
        return (
            f"tl.{missing.group(1)} does not exist in Triton {here} (the one running here); the grader runs "
            f"Triton {env.triton}. Use what Triton {env.triton} has ({WRITEUP})."
        )
    return None


def load_environment(path: Path | str = DEFAULT_SPEC) -> Environment:
    """Only the [environment] table: what the worker and the handout need before any submission code runs."""
    path = Path(path)
    table = toml.read(path).get("environment")
    if not isinstance(table, dict):
        raise SpecError(f"{path}: needs an [environment] table (torch, triton, numpy, python, allowed_imports)")
    try:
        return Environment.model_validate(table)
    except ValidationError as exc:
        raise SpecError(model_errors(path, exc, prefix="environment.")) from None
