"""`grader pack`: the student's last step: run the public tests, then build the archive to upload.

The archive is a .tar.gz of the submission's Python files at its root, and before it is
offered it goes through exactly what `grader batch` does to an archive (grader.course.batch.archives: safe
unpacking under the same caps, then finding the folder that holds the modules), so a packed
submission is one the staff's batch accepts. Failing public tests do not stop the archive
(partial work earns partial points); they are reported first so nobody uploads by surprise.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import ROOT
from grader.course.batch import archives

SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".benchmarks"}


class PackError(Exception):
    """The folder cannot become a submission archive; the message says what to fix."""


@dataclass
class TestRun:
    code: int
    summary: str

    @property
    def passed(self) -> bool:
        return self.code == 0


def files_to_pack(folder: Path) -> list[Path]:
    """The submission's Python files (helpers included), without caches, hidden files or links."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder)
        if path.is_symlink() or any(part in SKIP_PARTS or part.startswith(".") for part in rel.parts):
            continue
        found.append(path)
    return found


def run_public_tests(folder: Path, problems: list[str], handout: Path = ROOT / "handout") -> TestRun:
    """`pytest handout --submission FOLDER` (only the given problems' test files), in a child process."""
    targets = [str(handout / f"test_{name}.py") for name in problems if (handout / f"test_{name}.py").is_file()] or [
        str(handout)
    ]
    argv = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "--submission",
        str(folder.resolve()),
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    proc = subprocess.run(argv, cwd=str(handout.parent), capture_output=True, text=True, errors="replace")
    lines = [line for line in proc.stdout.strip().splitlines() if line.strip()]
    return TestRun(proc.returncode, lines[-1] if lines else proc.stderr.strip()[-300:])


def build_archive(folder: Path, out: Path, modules: list[str]) -> list[str]:
    """Write `out` (.tar.gz) and check it the way `grader batch` will; returns the packed names."""
    if not folder.is_dir():
        raise PackError(f"{folder} is not a folder (expected the folder with {', '.join(m + '.py' for m in modules)})")
    files = files_to_pack(folder)
    names = [str(p.relative_to(folder)) for p in files]
    missing = [m for m in modules if f"{m}.py" not in names]
    if missing:
        raise PackError(
            f"{folder} lacks {', '.join(m + '.py' for m in missing)}: keep the stub files even for problems you skip"
        )
    if archives.archive_suffix(out) != ".tar.gz":
        raise PackError(f"{out}: the archive's name must end in .tar.gz")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, name in zip(files, names):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(path.stat().st_mtime)
            tar.addfile(info, io.BytesIO(data))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".tmp-{out.name}")  # keeps the .tar.gz suffix the unpacker goes by
    tmp.write_bytes(buf.getvalue())
    with tempfile.TemporaryDirectory(prefix="grader-pack-") as scratch:
        try:
            unpacked = archives.unpack(tmp, Path(scratch) / "unpacked")
            archives.find_submission_root(unpacked, modules)
        except archives.ArchiveError as exc:
            tmp.unlink(missing_ok=True)
            raise PackError(f"the archive would be refused by the grader: {exc}") from None
    tmp.replace(out)
    return names
