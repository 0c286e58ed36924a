"""The commands around results (wired into grader/cli.py): re-scoring, the write-up's tables,
the student's archive, and Gradescope's autograder.

Kept apart from cli.py so each command's options live in the module that runs it.
"""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from grader import gradescope_autograder, pack, rescore, writeup

    rescore.add_parser(sub)
    writeup.add_parser(sub)
    pack.add_parser(sub)
    gradescope_autograder.add_parser(sub)
