"""`grader gradescope-autograder --out DIR`: the zip Gradescope's autograder takes, for correctness.

Gradescope runs an autograder in its own containers without a GPU (gradescope-autograders
.readthedocs.io, "Autograder Specifications"; the default base image is Ubuntu 22.04, "Base
Images"): `setup.sh` (grader/course/gradescope_scripts.py) installs the spec's grading environment
into a venv of its own on the image's python3 (3.10 there), and `run_autograder` grades each
upload on the CPU through Triton's interpreter, public and hidden CPU cases
(grader/course/gradescope_run.py), with a secret drawn per run. Performance reads "not measured"
until the staff add the GPU grades of `grader batch` (`--gpu-grades`, grader/engine/records/gradescope_gpu.py).

The zip carries the grader package, the spec (hidden cases unless --public-only), the
requirements and optionally the GPU grades; never reference/ (not needed without
timing) or anything else of the repository. Every file but the grader's code is owner-only.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from grader import ROOT
from grader.course import gradescope_scripts
from grader.engine.assignment.load import load_assignment
from grader.engine.records.gradescope_gpu import GPU_GRADES_NAME, collect
from grader.engine.spec.model import DEFAULT_SPEC, HIDDEN_NAME

#: where the package has run end to end (tests/grader/course/test_gradescope_container.py)
TESTED_ON = (
    "Debian 12 bookworm, python3 3.11 (the local image triton-kernels-cpu-base:bookworm, laid out as "
    "Gradescope's /autograder), in this project's CI; the grader's code is also checked against Python 3.10's "
    "standard library. Not yet run on Gradescope's own Ubuntu 22.04 image"
)
#: Gradescope's default overall timeout is 10 minutes (its troubleshooting page): stop a minute before
DEFAULT_BUDGET_S = 540

README = """\
Autograder for {title} (assignment version {version}), built by `grader gradescope-autograder`.

Base image: written for Gradescope's default, Ubuntu 22.04 (python3 3.10); Python 3.10 or newer
is needed. Tested on: {tested_on}.

setup.sh installs requirements.txt (the assignment's grading environment, exactly: torch {torch},
Triton {triton}, numpy{numpy}, {packages}) into /autograder/venv, from wheels/ when the zip holds
one (or GRADER_WHEELHOUSE names a folder), else from the network (torch's CPU build).
run_autograder grades /autograder/submission on the CPU within {budget} s and always writes
/autograder/results/results.json.
Hidden cases: {hidden}. GPU grades: {gpu}.
"""


def _mode(name: str) -> int:
    """The grader's code is world-readable (workers import it); the rest is the owner's (root's)."""
    if name in ("setup.sh", "run_autograder"):
        return 0o700
    return 0o644 if name.startswith("grader/") else 0o600


def _grader_files() -> dict[str, bytes]:
    package = ROOT / "grader"
    return {
        str(Path("grader") / path.relative_to(package)): path.read_bytes()
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def build_zip(
    out: Path,
    spec_path: Path = DEFAULT_SPEC,
    public_only: bool = False,
    gpu_grades: Path | None = None,
    budget_s: int = DEFAULT_BUDGET_S,
) -> Path:
    """Write OUT/autograder.zip; returns it."""
    spec = load_assignment(spec_path, hidden=False if public_only else None)
    env = spec.environment
    files: dict[str, bytes] = {
        "setup.sh": gradescope_scripts.setup_sh(TESTED_ON).encode(),
        "run_autograder": gradescope_scripts.run_autograder(budget_s).encode(),
        "requirements.txt": gradescope_scripts.requirements(env).encode(),
        "assignment/assignment.toml": spec_path.read_bytes(),
    }
    hidden = spec_path.with_name(HIDDEN_NAME)
    if not public_only and hidden.is_file():
        files[f"assignment/{HIDDEN_NAME}"] = hidden.read_bytes()
    graded = collect(gpu_grades, spec.assignment.version) if gpu_grades is not None else None
    if graded is not None:
        files[GPU_GRADES_NAME] = graded.model_dump_json().encode()
    files["README.txt"] = README.format(
        title=spec.assignment.title,
        version=spec.assignment.version,
        tested_on=TESTED_ON,
        torch=env.torch,
        triton=env.triton,
        numpy=env.numpy,
        packages=", ".join(f"{n} {v}" for n, v in sorted(env.packages.items())) or "nothing else",
        budget=budget_s,
        hidden="included" if f"assignment/{HIDDEN_NAME}" in files else "left out",
        gpu=f"{len(graded.grades)} GPU-graded records" if graded is not None else "none",
    ).encode()
    files.update(_grader_files())
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = _mode(name) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return target
