"""`grader gradescope-autograder --out DIR`: the zip Gradescope's autograder takes, for correctness.

Gradescope runs an autograder in its own Ubuntu containers without a GPU (gradescope-autograders
.readthedocs.io, "Autograder Specifications"): the zip holds `setup.sh` (run once, as root, to
build the image) and `run_autograder` (run per submission; the submission is in
/autograder/submission, its metadata in /autograder/submission_metadata.json, and the results go
to /autograder/results/results.json). Here that means the CPU suite through Triton's interpreter,
public and hidden CPU cases, with a secret generated into the zip; performance reads "not
measured" (no verdict, no points). GPU grades reach Gradescope through its CSV score import,
from `grader batch`'s gradebook.csv (README.md, "Gradescope").

The zip carries the grader package, the spec (hidden cases unless --public-only) and a minimal
pyproject.toml; never reference/ (not needed without timing) or anything else of the repository.
"""

from __future__ import annotations

import secrets
import tempfile
import zipfile
from pathlib import Path

from grader import ROOT
from grader.spec.load import load_assignment
from grader.spec.model import DEFAULT_SPEC, HIDDEN_NAME

SECRET_NAME = "grader-secret.txt"

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope builds the autograder image with this, once, as root.
set -euo pipefail
apt-get install -y -q python3 python3-pip python3-venv >/dev/null
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
# the CPU build of torch: Gradescope's machines have no GPU
/autograder/venv/bin/pip install -q "torch=={torch}" --index-url https://download.pytorch.org/whl/cpu
/autograder/venv/bin/pip install -q "triton=={triton}" /autograder/source
chmod 600 /autograder/source/{secret}
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this once per submission; the results go to $ROOT/results/results.json.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
cd "$ROOT/source"
mkdir -p "$ROOT/results"
exec "$PYTHON" -m grader.commands.gradescope_autograder \\
  --source "$ROOT/source" --submission "$ROOT/submission" \\
  --metadata "$ROOT/submission_metadata.json" --results "$ROOT/results/results.json" \\
  ${{GRADER_PROBLEMS:+--problems "$GRADER_PROBLEMS"}}
"""


def pyproject(version: str) -> str:
    """The autograder's package: the grader and what it imports (torch is installed before, CPU build)."""
    deps = ", ".join(
        f'"{d}"'
        for d in ("numpy", "pydantic>=2.6", "jinja2>=3.1", "rich>=13", "pytest>=8", "pytest-benchmark>=4", "pyyaml>=6")
    )
    sections = {
        "build-system": ['requires = ["setuptools>=68"]', 'build-backend = "setuptools.build_meta"'],
        "project": [
            'name = "triton-kernels-autograder"',
            f'version = "{version}"',
            'requires-python = ">=3.10"',
            f"dependencies = [{deps}]",
        ],
        "tool.setuptools.packages.find": ['include = ["grader*"]'],
        "tool.setuptools.package-data": ['grader = ["records/templates/*", "records/templates/**/*"]'],
    }
    return "\n".join(f"[{name}]\n" + "\n".join(lines) + "\n" for name, lines in sections.items())


def _versions(spec_path: Path) -> tuple[str, str]:
    """torch and Triton for the image: the spec's [environment] when it pins them, else these."""
    import tomllib

    import torch
    import triton

    table = tomllib.loads(spec_path.read_text(encoding="utf-8")).get("environment") or {}
    return str(table.get("torch") or torch.__version__.split("+")[0]), str(table.get("triton") or triton.__version__)


def build_zip(out: Path, spec_path: Path = DEFAULT_SPEC, public_only: bool = False) -> Path:
    """Write OUT/autograder.zip (and the unpacked files beside it, for a look); returns the zip."""
    spec = load_assignment(spec_path, hidden=False if public_only else None)
    torch_version, triton_version = _versions(spec_path)
    files: dict[str, bytes] = {
        "setup.sh": SETUP_SH.format(torch=torch_version, triton=triton_version, secret=SECRET_NAME).encode(),
        "run_autograder": RUN_AUTOGRADER.format().encode(),
        "pyproject.toml": pyproject(spec.assignment.version).encode(),
        SECRET_NAME: secrets.token_hex(32).encode(),
        "assignment/assignment.toml": spec_path.read_bytes(),
    }
    hidden = spec_path.with_name(HIDDEN_NAME)
    if not public_only and hidden.is_file():
        files[f"assignment/{HIDDEN_NAME}"] = hidden.read_bytes()
    package = ROOT / "grader"
    for path in sorted(package.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            files[str(Path("grader") / path.relative_to(package))] = path.read_bytes()
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return target


# -- inside Gradescope's container ---------------------------------------------------------------


def _submission_folder(upload: Path, scratch: Path, modules: list[str]) -> Path:
    """The folder to grade: the upload itself, a folder inside it, or an archive it holds (grader pack's)."""
    from grader.course import archives

    packed = [p for p in upload.iterdir() if p.is_file() and archives.archive_suffix(p)] if upload.is_dir() else []
    if packed and not any((upload / f"{m}.py").is_file() for m in modules):
        return archives.find_submission_root(archives.unpack(packed[0], scratch / "unpacked"), modules)
    return archives.find_submission_root(upload, modules)


def run(source: Path, upload: Path, metadata: Path, results: Path, problems: list[str] | None = None) -> int:
    """Grade the upload on the CPU and write Gradescope's results.json; never exits without one."""
    from grader.commands.grading_options import hidden_paths
    from grader.course import gradescope_metadata
    from grader.orchestrator.grade import grade
    from grader.orchestrator.options import GradeOptions
    from grader.records import gradescope

    spec_path = source / "assignment" / "assignment.toml"
    secret_file = source / SECRET_NAME
    try:
        assignment = load_assignment(spec_path)
        with tempfile.TemporaryDirectory(prefix="grader-upload-") as scratch:
            folder = _submission_folder(upload, Path(scratch), [p.module for p in assignment.problems])
            hide = hidden_paths(spec_path, results.parent) + [secret_file]
            options = GradeOptions(
                device="cpu",
                secret=secret_file.read_text().strip(),
                problems=problems,
                hide=hide,
                student=gradescope_metadata.read_submission_metadata(metadata),
            )
            result = grade(assignment, folder, options)
        text = gradescope.results_json(result)
    except Exception as exc:  # a bad upload or a broken image: the student still gets a reason
        reason = f"{type(exc).__name__}: {exc}"
        text = gradescope.GradescopeResults(
            score=0.0,
            output=f"NOT GRADED: your submission could not be graded, so the score above is not a "
            f"grade.\nReason: {reason}",
        ).model_dump_json(indent=2, exclude_none=True)
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(text, encoding="utf-8")
    return 0
