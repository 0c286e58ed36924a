"""Inside Gradescope's container: one upload graded into results.json, whatever happens.

Gradescope runs run_autograder as root with the zip unpacked in /autograder/source, the upload in
/autograder/submission and its metadata in /autograder/submission_metadata.json ("Autograder
Specifications", "Submission Metadata"). Without CAP_SYS_ADMIN there is no mount namespace, so a
worker is kept from the hidden files by file modes alone (the sandbox's "uid" level): before
grading, everything under source/ but the grader's code is made root-only, and the results, the
upload and its metadata too; the sandbox then checks, as the worker's uid, that none of it can
be read before it grades a hidden case (grader/engine/sandbox/exposure.py). The secret that seeds the
inputs is drawn here, per run, and lives only in this process.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from grader.engine.records.gradescope_gpu import GPU_GRADES_NAME

#: the only folders of the package a worker reads (the interpreter's venv lies outside source/)
PUBLIC_ENTRIES = ("grader",)


class NotASubmission(Exception):
    """The upload holds none of the assignment's files: said to the student, nothing graded."""


def _chmod_tree(path: Path, public: bool) -> None:
    """public: others may read and enter (go=rX); else root only (go=)."""
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            entry = Path(folder, name)
            if not entry.is_symlink():
                mode = entry.stat().st_mode & 0o7777
                os.chmod(entry, (mode & 0o700) | ((0o055 if entry.is_dir() else 0o044) if public else 0))
    if not path.is_symlink():
        mode = path.stat().st_mode & 0o7777
        os.chmod(path, (mode & 0o700) | ((0o055 if path.is_dir() else 0o044) if public else 0))


def harden(source: Path, upload: Path, metadata: Path, results: Path) -> None:
    """Everything the package holds but the grader's code readable by root only (as the worker needs).

    source/ itself stays listable (0755): a worker imports `grader` from it, and Python's import
    system finds a package by listing its folder (with 0711 the import fails). The names it
    shows are the zip's, which README.md lists anyway; every file's content is root's.
    """
    os.chmod(source, 0o755)
    for entry in source.iterdir():
        _chmod_tree(entry, public=entry.name in PUBLIC_ENTRIES)
    for path in (upload, metadata, results.parent):
        if path.exists():
            _chmod_tree(path, public=False)


def submission_folder(upload: Path, scratch: Path, modules: list[str]) -> Path:
    """The folder to grade: the upload, a folder in it, or an archive it holds (`grader pack`'s)."""
    from grader.course.batch import archives

    wanted = [f"{m}.py" for m in modules]
    if not upload.is_dir() or not any(upload.iterdir()):
        raise NotASubmission(f"your upload is empty. Upload the assignment's files: {', '.join(wanted)}.")
    packed = [p for p in upload.iterdir() if p.is_file() and archives.archive_suffix(p)]
    if packed and not any((upload / name).is_file() for name in wanted):
        upload = archives.unpack(packed[0], scratch / "unpacked")
    folder = archives.find_submission_root(upload, modules)
    if not any((folder / name).is_file() for name in wanted):
        found = sorted(p.name for p in folder.iterdir())[:10]
        raise NotASubmission(
            f"your upload holds none of the assignment's files ({', '.join(wanted)}); it holds: "
            f"{', '.join(found) or 'nothing'}. Upload those files, or the archive `grader pack` writes."
        )
    return folder


def _users(metadata: Path) -> list[Any]:
    try:
        data = json.loads(metadata.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    users = data.get("users") if isinstance(data, dict) else None
    return users if isinstance(users, list) else []


def student_notes(hidden_tests: int, pending_points: float, gpu_note: str) -> list[str]:
    """What a student on Gradescope is told about what they see and when (the write-up says the same)."""
    notes = [
        "What you see here: correctness on Gradescope's CPU machines, through Triton's interpreter, on small "
        "inputs drawn anew for every submission."
    ]
    if hidden_tests:
        notes.append(
            f"{hidden_tests} hidden tests were graded too. Gradescope shows them, and with them your total score, "
            "only once the course staff publish grades: until then you see the visible tests but no total."
        )
    if pending_points:
        notes.append(gpu_note)
    return notes


def _graded(source: Path, upload: Path, metadata: Path, results: Path, problems: list[str] | None) -> str:
    from grader.course.batch import gradescope_metadata
    from grader.engine.assignment.load import load_assignment
    from grader.engine.judge import rescore
    from grader.engine.orchestrator.launch import GradeCommand, hidden_paths
    from grader.engine.records import gradescope, gradescope_gpu
    from grader.engine.records.model import Result

    spec_path = source / "assignment" / "assignment.toml"
    assignment = load_assignment(spec_path)
    gpu_file = source / GPU_GRADES_NAME
    with tempfile.TemporaryDirectory(prefix="grader-upload-") as scratch:
        folder = submission_folder(upload, Path(scratch), [p.module for p in assignment.problems])
        out = Path(scratch) / "out"
        command = GradeCommand(
            spec=spec_path,
            device="cpu",
            problems=tuple(problems) if problems else None,
            secret=secrets.token_hex(32),  # per run: a resubmission gets new inputs
            hide=(*hidden_paths(spec_path, out), metadata, gpu_file, results.parent),
        )
        done = subprocess.run(
            command.argv(folder, out), env=command.env(), cwd=source, capture_output=True, text=True, errors="replace"
        )
        if done.returncode != 0 or not (out / "result.json").is_file():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise RuntimeError(f"`grader grade` exited with code {done.returncode}: {tail}")
        result = Result.model_validate_json((out / "result.json").read_text(encoding="utf-8"))
    result.submission.student = gradescope_metadata.read_submission_metadata(metadata)
    grades = gradescope_gpu.GpuGrades.model_validate_json(gpu_file.read_bytes()) if gpu_file.is_file() else None
    found = gradescope_gpu.match(grades, _users(metadata), result.submission.sha256)
    pending = result.pending_score
    if found.record is not None:
        result = rescore.with_gpu_performance(result, found.record)
    hidden = sum(1 for p in result.problems for t in p.tests if t.visibility == "hidden")
    return gradescope.results_json(result, student_notes(hidden, pending, found.note))


def run(source: Path, upload: Path, metadata: Path, results: Path, problems: list[str] | None = None) -> int:
    """Grade the upload on the CPU and write Gradescope's results.json; never returns without one."""
    from grader.engine.records import gradescope
    from grader.engine.records.files import write_atomic

    try:
        harden(source, upload, metadata, results)
        text = _graded(source, upload, metadata, results, problems)
    except NotASubmission as exc:
        text = gradescope.not_graded("no_submission", str(exc))
    except Exception as exc:  # the grading itself broke: the student still gets a reason
        text = gradescope.not_graded(
            "grading_crashed",
            f"the autograder failed while grading ({type(exc).__name__}: {exc}). This is not a verdict on your "
            "code: submit again, and tell the course staff if it happens again.",
        )
    results.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(results, text)
    return 0
