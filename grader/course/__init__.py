"""A class: graded, served, ranked and handed to Gradescope. It never calls the engine: it runs
`grader grade` somewhere (grader.engine.orchestrator.launch) and reads the record it writes
(grader.engine.records); of the engine it imports only those, the spec and re-scoring
(tests/grader/test_layout.py holds the seam).

- batch/: a class on one machine (discovery, archives: a student's upload unpacked under size,
  count and path rules, tasks, runners, resume, results, run); cluster/: the same on Ray or
  Slurm; containers/: the image and one container per grading; leaderboard/: the static pages;
- service/: `grader serve`, the same exchange live: uploads checked as archives are, a queue
  graded by the batch's runners, tokens, quotas and pages;
- pack: the archive a student builds (`grader pack`); precheck: what `grader submit` checks first;
  export_handout: the students' repository; writeup: the write-up's generated tables;
  gradescope_package: Gradescope's autograder.zip; gradescope_run: one upload graded inside it.
"""
