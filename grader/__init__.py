"""The grading engine of the Triton kernels assignment: read it top-down from cli.py.

The folders say which rules their files live under:

- harness/: runs inside the worker, beside the submission (its __init__ states the rules);
- sandbox/: starts, limits and stops that worker, from the trusted side;
- orchestrator/: grades one submission (never imports it); judge/: checks, scores, flags;
- records/: writes what a grade becomes (result.json, report.html, Gradescope, gradebook);
- batch/, cluster/, containers/: a class, on one machine, a cluster or in Docker;
- course/: archives in and out, the handout export, the write-up, the Gradescope package;
- leaderboard/: the static pages; commands/: one module per `grader` verb (argparse lives there);
- problems/: one folder per problem; spec/: the assignment as data.

At the top: the kernel the worker shares with the trusted side (protocol, timing, kernel_cache,
loading); handout/: what `pytest handout` runs in the student's own pytest.
"""

from pathlib import Path

#: the checkout (or installed tree) that holds assignment/, reference/ and grader/
ROOT = Path(__file__).resolve().parent.parent
