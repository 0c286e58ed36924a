"""The toy problem's files are copied into a course by test_new_problem.py, never collected here."""

collect_ignore_glob = ["*"]
