#!/usr/bin/env bash
# Create .venv (if missing) with the grader, its test tools and the grading environment: the
# torch and Triton pair of assignment/assignment.toml [environment] (torch 2.11.0, triton 3.6.0,
# numpy < 2.4 for Triton 3.6's interpreter), pinned in pyproject.toml. PyPI's torch 2.11.0 is the
# CUDA build; it runs on a machine without a GPU too (kernels then go through Triton's interpreter).
# KEEP_TORCH=1 keeps the torch and triton already in .venv (a build for another CUDA, say) and
# installs everything else; `pytest handout` then says in its header when they are not the pair.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || { echo "setup-python: Python 3.11 or newer is needed (the grader reads TOML with tomllib)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  # torch and its CUDA libraries take about 6 GB once installed: say so before pip fails halfway
  free_kb=$(df -Pk . | awk 'NR == 2 {print $4}')
  if [ "${free_kb:-0}" -lt $((7 * 1024 * 1024)) ]; then
    echo "setup-python: $((free_kb / 1024 / 1024)) GB free on $(df -P . | awk 'NR == 2 {print $6}'); .venv needs about 7 GB (torch, Triton, CUDA libraries)" >&2
    exit 1
  fi
  echo "setup-python: creating .venv" >&2
  python3 -m venv .venv
fi
. .venv/bin/activate
# No pip cache: torch and its CUDA libraries are 2.6 GB of wheels that would only sit there twice.
export PIP_NO_CACHE_DIR=1
# pip stays quiet (-q): these lines say which step the few silent minutes of a first install are in
echo "setup-python: installing the grader and its dependencies into .venv (the first time: torch, Triton and CUDA libraries, about 2.6 GB, a few minutes)" >&2
python -m pip install -q --upgrade pip >/dev/null
if [ "${KEEP_TORCH:-0}" = "1" ]; then
  # every dependency of pyproject.toml (and its dev extra) but torch and triton, then the project alone
  others=$(python - <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["dev"]:
    if not requirement.startswith(("torch", "triton")):
        print(requirement)
PY
)
  # shellcheck disable=SC2086  # one requirement a line, none with spaces
  python -m pip install -q $others
  python -m pip install -q --no-deps -e .
else
  python -m pip install -q -e ".[dev]"
fi
echo "setup-python: .venv ready ($(.venv/bin/python -c 'import torch, triton; print(f"torch {torch.__version__}, triton {triton.__version__}")' 2>/dev/null || echo 'torch not importable'))" >&2
