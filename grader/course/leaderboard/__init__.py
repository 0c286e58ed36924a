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
