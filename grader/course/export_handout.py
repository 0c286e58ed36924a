"""`grader export-handout`: the students' repository, built from this one.

What goes out: the public tests (handout/), the stubs (student_template/), the public spec and the
write-up (assignment/), and the grader package itself so that students can run `pytest handout`
and `grader grade student_template` locally. What never goes out: reference/, the hidden cases,
examples (some are solutions), the framework's tests, benchmarks, Docker and CI files. After
copying, the export is scanned for every hidden case name and for the reference kernels' source,
and the export is refused if any is found.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from grader import ROOT
from grader.engine.assignment.load import load_assignment
from grader.engine.records.files import write_atomic
from grader.engine.spec import toml, versions
from grader.engine.spec.model import HIDDEN_NAME

SHIPPED = ("handout", "student_template", "grader")
ASSIGNMENT_FILES = ("assignment.toml", "README.md")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".benchmarks", HIDDEN_NAME)

STUDENT_PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "triton-kernels-handout"
version = "{version}"
description = "{title}: the student handout"
requires-python = "{python}"
dependencies = [
{environment}
]

[project.scripts]
grader = "grader.cli:entry"

[tool.setuptools.packages.find]
include = ["grader*"]

[tool.setuptools.package-data]
grader = ["engine/records/templates/*", "engine/records/templates/**/*"]

[tool.pytest.ini_options]
pythonpath = ["."]
addopts = "--import-mode=importlib -p no:cacheprovider -p grader.engine.handout.options"
testpaths = ["handout"]
"""

STUDENT_README = """\
# {title}

Your task: write the {count} Triton kernels in `student_template/`. Start with the write-up:
[assignment/README.md](assignment/README.md).

```bash
pip install -e .                       # the grading versions (torch {torch}, triton {triton}), pytest, the grader
pytest handout                         # public correctness tests (CPU: Triton's interpreter)
pytest handout --benchmark-only        # on a GPU: your kernels timed next to PyTorch's
grader grade student_template --out grades/me   # your score on the public cases
grader pack student_template --out me.tar.gz    # the public tests, then the archive to upload
```

Submit the `student_template/` folder ({files}).
Assignment version {version}.
"""


class LeakError(Exception):
    """The export contains something students must never see."""


def _secrets(root: Path) -> dict[str, list[str]]:
    """What must not appear in the export: hidden case names and the reference kernels' lines."""
    needles: dict[str, list[str]] = {"hidden case": [], "reference source": []}
    hidden = root / "assignment" / HIDDEN_NAME
    if hidden.exists():
        data = toml.loads(hidden.read_text())
        for cases in data.get("hidden", {}).values():
            needles["hidden case"] += [f'"{c["name"]}"' for c in cases] + [
                c["name"] for c in cases if len(c["name"]) > 12
            ]
    public = "\n".join(stub.read_text() for stub in (root / "student_template").glob("*.py"))
    for file in sorted((root / "reference").glob("*.py")):
        for line in file.read_text().splitlines():
            text = line.strip()
            # long code lines identify the solution; the API's signatures are public by design
            if len(text) >= 48 and text not in public and not text.startswith(("#", '"""', "import", "from")):
                needles["reference source"].append(text)
    return needles


def scan_for_leaks(export: Path, root: Path = ROOT) -> list[str]:
    """Every place in `export` where a hidden case name or a reference line appears."""
    found = []
    needles = _secrets(root)
    for file in sorted(p for p in export.rglob("*") if p.is_file()):
        try:
            text = file.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for what, items in needles.items():
            for needle in items:
                if needle in text:
                    found.append(f"{file.relative_to(export)}: {what} {needle[:60]!r}")
    if (export / "reference").exists():
        found.append("reference/ folder present")
    if list(export.rglob(HIDDEN_NAME)):
        found.append(f"{HIDDEN_NAME} present")
    return found


def export_handout(out: Path, root: Path = ROOT) -> Path:
    """Write the students' repository to `out` (which must be empty or absent)."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: export into a new folder")
    spec = load_assignment(root / "assignment" / "assignment.toml", hidden=False)
    out.mkdir(parents=True, exist_ok=True)
    for name in SHIPPED:
        shutil.copytree(root / name, out / name, ignore=IGNORE)
    (out / "assignment").mkdir()
    for name in ASSIGNMENT_FILES:
        source = root / "assignment" / name
        if source.exists():
            shutil.copy2(source, out / "assignment" / name)
    info, env = spec.assignment, spec.environment
    pins = "\n".join(f'    "{r}",' for r in [*versions.requirements(env), *versions.GRADER_DEPENDENCIES])
    write_atomic(
        out / "pyproject.toml",
        STUDENT_PYPROJECT.format(version=info.version, title=info.title, python=env.python, environment=pins),
    )
    files = ", ".join(f"{p.module}.py" for p in spec.problems)
    readme = STUDENT_README.format(
        version=info.version,
        title=info.title,
        torch=env.torch,
        triton=env.triton,
        count=len(spec.problems),
        files=files,
    )
    write_atomic(out / "README.md", readme)
    write_atomic(out / ".gitignore", "__pycache__/\n*.egg-info/\n.benchmarks/\ngrades/\n.venv/\n")
    leaks = scan_for_leaks(out, root)
    if leaks:
        shutil.rmtree(out)
        raise LeakError("the export would leak:\n  " + "\n  ".join(leaks))
    return out
