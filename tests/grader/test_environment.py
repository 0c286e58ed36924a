"""One environment: every install pins the spec's torch and Triton, and imports are judged alike.

The spec's [environment] is the one source; each place that installs torch and Triton (pyproject,
the student export, both images' requirements, the GPU base image, the setup script, the
write-ups) is read and compared with it. The import policy and the version hints are exercised on
real submissions through the real `grader grade` and `pytest handout`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from grader.course.export_handout import export_handout
from grader.engine.harness import gpu_compile, imports, interpreter_driver
from grader.engine.harness.serve import describe_exception
from grader.engine.spec import gpu_limits, versions
from grader.engine.spec.model import SpecError
from grader.engine.spec.versions import load_environment

ROOT = Path(__file__).resolve().parents[2]
ENV = load_environment()
TRITON_39_ERROR = "Block pointers have been removed in favor of the tensor descriptor API"  # Triton 3.9's words


def pins_in(requirements: list[str]) -> dict[str, Requirement]:
    parsed = [Requirement(r) for r in requirements if r.strip() and not r.lstrip().startswith("#")]
    return {r.name.lower(): r for r in parsed}


def disagreements(where: str, pins: dict[str, Requirement]) -> list[str]:
    """How `pins` differ from the environment: torch and triton exact, numpy in range, packages exact."""
    wrong = []
    for name, want in (("torch", ENV.torch), ("triton", ENV.triton), *ENV.packages.items()):
        got = pins.get(name)
        if got is None or str(got.specifier) != f"=={want}":
            wrong.append(f"{where}: {name} is {got.specifier if got else 'missing'}, the spec says =={want}")
    numpy = pins.get("numpy")
    exact = numpy and [s.version for s in numpy.specifier if s.operator == "=="]
    if (
        numpy is None
        or (exact and exact[0] not in SpecifierSet(ENV.numpy))
        or (not exact and numpy.specifier != SpecifierSet(ENV.numpy))
    ):
        wrong.append(f"{where}: numpy is {numpy.specifier if numpy else 'missing'}, the spec says numpy{ENV.numpy}")
    return wrong


def requirement_lines(path: Path) -> list[str]:
    return [line.split("#")[0] for line in path.read_text().splitlines()]


def test_every_install_uses_the_spec_pair(tmp_path: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    export_handout(tmp_path / "handout")
    student = tomllib.loads((tmp_path / "handout" / "pyproject.toml").read_text())["project"]
    wrong = disagreements("pyproject.toml", pins_in(project["dependencies"]))
    wrong += disagreements("the exported handout's pyproject.toml", pins_in(student["dependencies"]))
    for variant in ("cpu", "gpu"):
        wrong += disagreements(
            f"docker/requirements-{variant}.txt",
            pins_in(requirement_lines(ROOT / "docker" / f"requirements-{variant}.txt")),
        )
    for where, python in (
        ("pyproject.toml", project["requires-python"]),
        ("the exported handout", student["requires-python"]),
    ):
        if python != ENV.python:
            wrong.append(f"{where}: requires-python {python}, the spec says {ENV.python}")
    base = re.search(r"ARG BASE_IMAGE=(\S+)", (ROOT / "docker" / "Dockerfile").read_text())
    if not base or not base.group(1).startswith(f"pytorch/pytorch:{ENV.torch}-"):
        wrong.append(
            f"docker/Dockerfile: the GPU base image {base and base.group(1)} is not PyTorch's image of torch "
            f"{ENV.torch}"
        )
    setup = (ROOT / "scripts" / "setup-python.sh").read_text()
    wrong += [
        f"scripts/setup-python.sh installs torch {v}" for v in re.findall(r"torch==([\d.]+)", setup) if v != ENV.torch
    ]
    for doc in ("README.md", "assignment/README.md", "docker/README.md"):
        text = (ROOT / doc).read_text()
        if f"torch {ENV.torch}" not in text or f"Triton {ENV.triton}" not in text:
            wrong.append(f"{doc} does not name torch {ENV.torch} and Triton {ENV.triton}")
    assert not wrong, "\n".join(wrong)


def test_an_incomplete_environment_is_refused_naming_the_key(tmp_path: Path) -> None:
    spec = tmp_path / "assignment.toml"
    table = (
        '[environment]\npython = ">=3.11"\ntorch = "{torch}"\ntriton = "3.6.0"\nnumpy = '
        '"<2.4"\nallowed_imports = {allowed}\n'
    )
    spec.write_text(table.format(torch="2.11", allowed='["torch", "triton", "numpy"]'))
    with pytest.raises(SpecError, match=r"environment\.torch: String should match"):
        load_environment(spec)
    spec.write_text(table.format(torch="2.11.0", allowed='["torch", "triton", "numpy", "einops"]'))
    with pytest.raises(SpecError, match=r"unpinned \['einops'\]"):
        load_environment(spec)
    spec.write_text('[assignment]\nname = "t"\n')
    with pytest.raises(SpecError, match=r"needs an \[environment\] table"):
        load_environment(spec)


# -- the import policy --------------------------------------------------------------------------

GELU_IMPORTING = """\
import torch
import triton
import triton.language as tl
import {module}


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n).to(tl.float32)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    y = 0.5 * x * (1.0 + (2.0 / (1.0 + tl.exp(-2.0 * inner)) - 1.0))
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n)


def triton_gelu(x):
    flat = x.contiguous().view(-1)
    out = torch.empty_like(flat)
    _gelu[(triton.cdiv(flat.numel(), 256),)](flat, out, flat.numel(), BLOCK=256)
    return out.view(x.shape)
"""


def submission(tmp_path: Path, module: str) -> Path:
    folder = tmp_path / f"imports-{module.replace('.', '-')}"
    folder.mkdir()
    (folder / "gelu.py").write_text(GELU_IMPORTING.format(module=module))
    return folder


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_a_package_outside_the_list_fails_alike_in_the_handout_and_the_grader(tmp_path: Path) -> None:
    """sympy is installed wherever torch is, and still refused: the list decides, not the machine."""
    folder = submission(tmp_path, "sympy")
    expected = (
        f"No module named 'sympy' in the grading environment (gelu.py, line 4 imports it). A submission may "
        f"import only "
        f"Python's standard library, its own modules and {', '.join(sorted(ENV.allowed_imports))}"
    )
    handout = run(
        "-m", "pytest", "handout", "--submission", str(folder), "-k", "gelu and cpu-square", "-q", "-p", "no:randomly"
    )
    assert handout.returncode == 1 and expected in handout.stdout, handout.stdout[-3000:]
    assert "Traceback" not in handout.stdout
    graded = run("-m", "grader.cli", "grade", str(folder), "--problems", "gelu", "--out", str(tmp_path / "out"))
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    gelu = next(p for p in result["problems"] if p["name"] == "gelu")
    assert gelu["score"] == 0 and expected in gelu["message"], (graded.stdout[-2000:], gelu["message"])


def test_a_helper_named_like_the_standard_library_is_refused_alike_in_the_handout_and_the_grader(
    tmp_path: Path,
) -> None:
    """`code.py`: pytest has the standard `code` loaded, a worker does not; both refuse, naming the file."""
    folder = tmp_path / "shadow"
    folder.mkdir()
    shutil.copy(ROOT / "examples" / "submissions" / "correct" / "gelu.py", folder / "code.py")
    (folder / "gelu.py").write_text("from code import triton_gelu\n")
    expected = "'code' is both a file of the submission and a module of Python's standard library"
    handout = run(
        "-m", "pytest", "handout", "--submission", str(folder), "-k", "gelu and cpu-square", "-q", "-p", "no:randomly"
    )
    assert handout.returncode == 1 and expected in handout.stdout, handout.stdout[-3000:]
    run("-m", "grader.cli", "grade", str(folder), "--problems", "gelu", "--device", "cpu", "--out", str(tmp_path / "o"))
    gelu = json.loads((tmp_path / "o" / "result.json").read_text())["problems"][0]
    assert gelu["score"] == 0 and expected in gelu["message"], gelu["message"]


@pytest.mark.parametrize(
    "module", ["einops", "numpy.linalg", "collections.abc", "torch.fx.experimental.symbolic_shapes"]
)
def test_allowed_imports_and_what_they_import_themselves_pass(tmp_path: Path, module: str) -> None:
    """torch.fx's symbolic shapes import sympy on their own: only the submission's files are judged."""
    folder = submission(tmp_path, module)
    handout = run(
        "-m", "pytest", "handout", "--submission", str(folder), "-k", "gelu and cpu-square", "-q", "-p", "no:randomly"
    )
    assert handout.returncode == 0, handout.stdout[-3000:]


def test_the_policy_lets_own_modules_and_guarded_fallbacks_through(tmp_path: Path) -> None:
    folder = tmp_path / "sub"
    (folder / "pkg").mkdir(parents=True)
    (folder / "helpers.py").write_text("VALUE = 3\n")
    (folder / "pkg" / "__init__.py").write_text("from . import inner\n")
    (folder / "pkg" / "inner.py").write_text("import json\n")
    (folder / "student_main.py").write_text(
        "import importlib\nimport helpers\nimport pkg\n"
        "try:\n    import scipy\nexcept ImportError as exc:\n    FALLBACK = str(exc)\n"
        "def dynamic():\n    return importlib.import_module('sympy')\n"
    )
    sys.path.insert(0, str(folder))
    policy = imports.install(folder, ENV.allowed_imports)
    try:
        import student_main  # type: ignore[import-not-found]

        assert student_main.helpers.VALUE == 3
        assert "No module named 'scipy' in the grading environment (student_main.py, line 5" in student_main.FALLBACK
        # as in a fresh worker: not loaded yet (torch loads it lazily; a loaded module never reaches
        # the finder, and import_module does not go through __import__)
        loaded = sys.modules.pop("sympy", None)
        try:
            with pytest.raises(imports.RefusedImport, match="'sympy'"):
                student_main.dynamic()
        finally:
            if loaded is not None:
                sys.modules["sympy"] = loaded
        import sympy  # noqa: F401  (this file is not the submission's: not judged)
    finally:
        policy.uninstall()
        sys.path.remove(str(folder))
        for name in ("student_main", "helpers", "pkg", "pkg.inner"):
            sys.modules.pop(name, None)
    assert imports.ImportPolicy not in {type(f) for f in sys.meta_path}


# -- versions -----------------------------------------------------------------------------------


def test_the_handout_says_before_any_test_when_versions_differ() -> None:
    other = ENV.model_copy(update={"triton": "3.9.0"})
    proc = run("-m", "pytest", "handout", "--co", "-p", "no:randomly", env={versions.ENV_VAR: other.model_dump_json()})
    header = proc.stdout.split("collected")[0]
    assert f"triton {versions.installed('triton')} here, 3.9.0 in grading" in header, proc.stdout[-3000:]
    assert "to test as graded: pip install torch==" in header
    assert "PytestWarning: not the grading versions" in proc.stdout
    same = run("-m", "pytest", "handout", "--co", "-p", "no:randomly")
    assert "(the same here)" in same.stdout and "not the grading versions" not in same.stdout


def test_a_removed_triton_api_gets_the_same_hint_from_the_worker_and_the_handout(tmp_path: Path) -> None:
    """The error Triton 3.9 raises for tl.make_block_ptr, raised here as 3.9 raises it."""
    folder = submission(tmp_path, "math")
    gelu = folder / "gelu.py"
    gelu.write_text(
        gelu.read_text().replace(
            "    flat = x.contiguous()",
            f"    raise NotImplementedError({TRITON_39_ERROR!r})\n    flat = x.contiguous()",
        )
    )
    hint = versions.hint(TRITON_39_ERROR)
    assert hint and f"The grader runs Triton {ENV.triton}, which has them" in hint and "Triton versions" in hint
    described = describe_exception(NotImplementedError(TRITON_39_ERROR), folder)
    assert described.message.endswith(hint)
    handout = run(
        "-m", "pytest", "handout", "--submission", str(folder), "-k", "gelu and cpu-square", "-q", "-p", "no:randomly"
    )
    assert "Triton versions" in handout.stdout and hint[:120] in handout.stdout.replace("\n", " "), handout.stdout[
        -3000:
    ]
    assert versions.hint("RuntimeError: CUDA error: an illegal memory access") is None


def test_driver_only_code_on_a_cpu_gets_a_hint_pointing_to_the_write_up(tmp_path: Path) -> None:
    """What the interpreter's stand-in driver cannot do (time, launch), as a student's code would meet it."""
    driver = interpreter_driver.TargetOnly(gpu_compile.TARGET, dict(gpu_limits.GPU_PROPERTIES))
    try:
        driver.get_benchmarker()  # type: ignore[attr-defined]
    except AttributeError as exc:
        error = exc
    described = describe_exception(error, tmp_path)
    assert "runs on a GPU only" in described.message and "On a CPU" in described.message
    assert versions.hint("RuntimeError: 0 active drivers ([]). There should only be one.")
