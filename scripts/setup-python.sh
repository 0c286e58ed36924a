#!/usr/bin/env bash
# Create .venv (if missing) with the grader, its test tools and a PyTorch build.
# On a machine without a GPU, torch==2.13.0 is the CPU build; with a GPU, keep the CUDA torch
# you have (set KEEP_TORCH=1 to skip installing torch).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
if [ "${KEEP_TORCH:-0}" != "1" ] && ! python -c "import torch" 2>/dev/null; then
  python -m pip install -q "torch==2.13.0"
fi
python -m pip install -q -e ".[dev]"
