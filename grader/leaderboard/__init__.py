"""`grader leaderboard`: a static leaderboard site built from the grader's result.json files.

The site is two files: `index.html` (one self-contained page, CSS and JS inline, no network) and
`leaderboard.json`. Both are rendered from one dictionary, and the page embeds that same JSON, so
the published data and the page never disagree.

Students are ranked by their best graded submission (total score, then the geometric mean of the
per-problem speedups against the staff reference). Anything the grader flagged (a failed kernel
check, timing it could not trust) is listed apart and never ranked. Student ids never reach the
site: each student is shown by a keyed-hash pseudonym unless a names file maps them.

By concern: inputs (reading results and names), ranking, names (pseudonyms), data (the site's
dictionary), render (the public page), staff (the staff page), site (all of it), command.
"""

from __future__ import annotations

from grader.leaderboard.command import add_parser, cmd_leaderboard
from grader.leaderboard.data import FORMAT_VERSION, build_data
from grader.leaderboard.inputs import Entry, LeaderboardError, Warn, find_result_files, load_entries, load_names
from grader.leaderboard.names import SALT_ENV, display_names, pseudonym
from grader.leaderboard.ranking import (
    Selection,
    flag_reasons,
    overall_speedup,
    problem_speedup,
    rank_key,
    review_reasons,
    select,
)
from grader.leaderboard.render import embed_json, render_html, write_site
from grader.leaderboard.site import build_site
from grader.leaderboard.staff import build_staff_data, staff_folder, write_staff

__all__ = [
    "FORMAT_VERSION",
    "Entry",
    "LeaderboardError",
    "SALT_ENV",
    "Selection",
    "Warn",
    "add_parser",
    "build_data",
    "build_site",
    "build_staff_data",
    "cmd_leaderboard",
    "display_names",
    "embed_json",
    "find_result_files",
    "flag_reasons",
    "load_entries",
    "load_names",
    "overall_speedup",
    "problem_speedup",
    "pseudonym",
    "rank_key",
    "render_html",
    "review_reasons",
    "select",
    "staff_folder",
    "write_site",
    "write_staff",
]
