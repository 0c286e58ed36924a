"""Grading a whole class: one result folder per student, a gradebook, a summary.

Input: a folder with one entry per student (a folder, an archive, or a Gradescope export of
`submission_*` folders). The package, by concern:

- options: BatchOptions, typed, built once from the command line (command);
- discovery: the students and their ids; tasks: each entry unpacked, located and hashed;
- results: reading, checking and atomically writing result records (resume by content hash);
- context, runners, runner_choice: in process, subprocesses or containers (grader.course.cluster adds
  Ray and Slurm), all ending in the same checked `Result`;
- run: the batch itself, its lock, progress and gradebook (grader.engine.records.gradebook writes the files).
"""
