"""What `pytest handout` runs in the student's own pytest: trusted by the student, not by the grader.

- options: a pytest plugin loaded before any conftest (`-p grader.engine.handout.options`), so
  `--submission DIR` is known when pytest first reads its arguments and DIR is never taken for a
  folder of tests whose conftest.py it would import;
- support: the harness's calls (grader.engine.harness) judged with the grader's own checks, so a local
  verdict is the graded one;
- child, isolation: each problem's cases run in a process of its own (child: what runs there;
  isolation: starting it, asking it, and telling a crash or a hang from the pytest side), so a
  kernel that segfaults fails its test instead of ending the run, as in the grader;
- errors: a submission's error, crash or hang in a few lines.
"""
