"""The two scripts of Gradescope's autograder zip, and the requirements setup.sh installs.

Gradescope's "Autograder Specifications" (gradescope-autograders.readthedocs.io/en/latest/specs/):
the zip holds `setup.sh`, "a setup (Bash) script that installs all your dependencies", run once
as root when the image is built, and `run_autograder`, run per submission, which must produce
/autograder/results/results.json. Its troubleshooting page: "We have a default overall timeout
of 10 minutes", after which "the submission will receive a 0", and "The autograder failed to
execute correctly" when results.json is missing or malformed. So run_autograder stops the grader
itself before Gradescope would, and writes a results.json of its own in bash whenever the grader
did not (no Python needed: the environment may be what failed).
"""

from __future__ import annotations

from grader.engine.spec import versions
from grader.engine.spec.model import Environment

#: the PyTorch index of CPU builds (Gradescope's machines have no GPU); PyPI for everything else
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
OLDEST_PYTHON = (3, 10)


def requirements(env: Environment) -> str:
    """requirements.txt: exactly the spec's grading environment, then what the grader imports."""
    header = "# assignment.toml [environment], exactly; then the grader's own dependencies\n"
    return header + "\n".join([*versions.requirements(env), *versions.GRADER_DEPENDENCIES]) + "\n"


SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# Written for Gradescope's default base image, Ubuntu 22.04 (python3 3.10); tested on {tested_on}.
# It installs source/requirements.txt into /autograder/venv on the image's own python3:
# from a local wheelhouse when one is given (GRADER_WHEELHOUSE, or a wheels/ folder in the zip),
# else from the network (torch's CPU build from PyTorch's index, the rest from PyPI).
set -uo pipefail
SOURCE="${{AUTOGRADER_ROOT:-/autograder}}/source"
VENV="${{AUTOGRADER_ROOT:-/autograder}}/venv"
FAILED="$SOURCE/.setup-failed"
rm -f "$FAILED"
fail() {{ echo "setup.sh: $*" >&2; echo "$*" > "$FAILED"; exit 1; }}

PY=python3
command -v "$PY" >/dev/null || fail "no python3 on this image"
"$PY" -c 'import sys; sys.exit(sys.version_info < ({major}, {minor}))' \\
  || fail "python3 is $("$PY" -V 2>&1); the grader needs {major}.{minor} or newer"
if ! "$PY" -c 'import ensurepip, venv' 2>/dev/null; then
  # Ubuntu splits venv out of python3
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv) >/dev/null \\
    || fail "python3-venv is missing and apt-get could not install it"
fi
"$PY" -m venv "$VENV" || fail "python3 -m venv failed"

WHEELS="${{GRADER_WHEELHOUSE:-}}"
[ -z "$WHEELS" ] && [ -d "$SOURCE/wheels" ] && WHEELS="$SOURCE/wheels"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir)
if [ -n "$WHEELS" ]; then
  "${{PIP[@]}}" --no-index --find-links "$WHEELS" -r "$SOURCE/requirements.txt" \\
    || fail "pip could not install requirements.txt from the wheelhouse $WHEELS"
else
  "${{PIP[@]}}" --upgrade pip || true
  "${{PIP[@]}}" --index-url {torch_index} --extra-index-url https://pypi.org/simple -r "$SOURCE/requirements.txt" \\
    || fail "pip could not install requirements.txt"
fi
# the environment must import, or no submission can be graded
"$VENV/bin/python" -c 'import torch, triton, numpy, pydantic, jinja2, yaml' \\
  || fail "the installed environment does not import"
# workers run as users of their own: they read the interpreter and the grader, nothing else here
chmod -R go=rX "$VENV"
echo "setup.sh: $("$VENV/bin/python" -c 'import sys, torch, triton, numpy; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)')"
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this per submission, as root; it always leaves a results.json behind.
set -uo pipefail
ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
PYTHON="${{AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}}"
RESULTS="$ROOT/results/results.json"
BUDGET="${{GRADER_TIME_BUDGET_S:-{budget}}}"
mkdir -p "$ROOT/results" && chmod 700 "$ROOT/results"
rm -f "$RESULTS"

# a results.json without Python: $1 is a kind (extra_data.failure), $2 what the student reads
not_graded() {{
  printf '{{"score": 0.0, "output": "NOT GRADED: %s\\\\nThe score above is not a grade.", "visibility": "visible", "stdout_visibility": "hidden", "extra_data": {{"status": "error", "failure": "%s"}}, "tests": []}}\\n' "$2" "$1" > "$RESULTS"
}}

if [ -e "$ROOT/source/.setup-failed" ] || [ ! -x "$PYTHON" ]; then
  not_graded environment "the autograder's environment did not install. This is a problem on the course's side, not in your code: please tell the course staff."
  exit 0
fi
cd "$ROOT/source"
timeout --kill-after=15 "$BUDGET" "$PYTHON" -m grader.commands.gradescope_autograder \\
  --source "$ROOT/source" --submission "$ROOT/submission" \\
  --metadata "$ROOT/submission_metadata.json" --results "$RESULTS" \\
  ${{GRADER_PROBLEMS:+--problems "$GRADER_PROBLEMS"}}
status=$?
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
  not_graded time_limit "grading did not finish within the autograder's time limit of $BUDGET s. Every problem has a time limit of its own, so this is usually a slow or busy autograder machine: submit again, and tell the course staff if it happens again."
elif ! "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(not isinstance(d.get("score"), (int, float)))' "$RESULTS" 2>/dev/null; then
  not_graded grader_failed "the autograder stopped before it could grade (exit status $status). This is a problem on the course's side, not in your code: please tell the course staff."
fi
exit 0
"""


def setup_sh(tested_on: str) -> str:
    return SETUP_SH.format(
        tested_on=tested_on, major=OLDEST_PYTHON[0], minor=OLDEST_PYTHON[1], torch_index=TORCH_CPU_INDEX
    )


def run_autograder(budget_s: int) -> str:
    return RUN_AUTOGRADER.format(budget=budget_s)
