"""Grading a whole class: one result folder per student, a gradebook, a summary.

Input: a folder with one entry per student (a folder, an archive, or a Gradescope export of
`submission_*` folders). The package, by concern:

- options: BatchOptions, typed, built once from the command line (command);
- discovery: the students and their ids; tasks: each entry unpacked, located and hashed;
- results: reading, checking and atomically writing result records (resume by content hash);
- context, runners, runner_choice: in process, subprocesses or containers (grader.cluster adds
  Ray and Slurm), all ending in the same checked `Result`;
- run: the batch itself, its lock, progress and gradebook (grader.gradebook writes the files).
"""

from __future__ import annotations

from grader.batch.context import Context, selected_problems
from grader.batch.discovery import (
    GRADESCOPE_METADATA,
    MANIFESTS,
    RESERVED,
    WORK,
    Entry,
    discover,
    read_gradescope_metadata,
    read_manifest,
    student_id,
)
from grader.batch.errors import BatchError
from grader.batch.options import (
    PER_PROBLEM_ALLOWANCE_S,
    STARTUP_ALLOWANCE_S,
    BatchOptions,
    ContainerOptions,
    RayOptions,
    SlurmOptions,
)
from grader.batch.results import (
    INFRA,
    MAX_RESULT_BYTES,
    BadResult,
    collect_result,
    commit_or_error,
    commit_result,
    error_result,
    previous,
    read_result,
    remove_partial_files,
)
from grader.batch.run import BatchLock, run_batch
from grader.batch.runners import ROOT, DockerRunner, InProcessRunner, Runner, SubprocessRunner, tail_lines
from grader.batch.tasks import SKIPPED_FOLDERS, Task, check_folder, prepare

__all__ = [
    "BadResult",
    "BatchError",
    "BatchLock",
    "BatchOptions",
    "ContainerOptions",
    "Context",
    "DockerRunner",
    "Entry",
    "GRADESCOPE_METADATA",
    "INFRA",
    "InProcessRunner",
    "MANIFESTS",
    "MAX_RESULT_BYTES",
    "PER_PROBLEM_ALLOWANCE_S",
    "RESERVED",
    "ROOT",
    "RayOptions",
    "Runner",
    "SKIPPED_FOLDERS",
    "STARTUP_ALLOWANCE_S",
    "SlurmOptions",
    "SubprocessRunner",
    "Task",
    "WORK",
    "check_folder",
    "collect_result",
    "commit_or_error",
    "commit_result",
    "discover",
    "error_result",
    "prepare",
    "previous",
    "read_gradescope_metadata",
    "read_manifest",
    "read_result",
    "remove_partial_files",
    "run_batch",
    "selected_problems",
    "student_id",
    "tail_lines",
]
