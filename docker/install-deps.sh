#!/bin/sh
# Build step of docker/Dockerfile: create /opt/venv on top of the base image's Python and install
# the grader's pinned dependencies into it.
#   VARIANT=cpu: from the wheels in /build/wheels only (pip --no-index; no network needed)
#   VARIANT=gpu: keep the base image's torch and triton when they match the pins, fetch the rest
# The venv sees the base image's site-packages, so a CUDA PyTorch image's torch is reused as is.
set -eu
variant="$1"
python=$(command -v python3 || command -v python)
"$python" -m venv --system-site-packages /opt/venv
pip="/opt/venv/bin/python -m pip --disable-pip-version-check --no-cache-dir"
if [ "$variant" = cpu ]; then
    if ! ls /build/wheels/*.whl >/dev/null 2>&1; then
        echo "install-deps: no wheels in docker/wheels/: run scripts/setup-docker.sh first" >&2
        exit 1
    fi
    $pip install -q --no-index --find-links /build/wheels -r /build/requirements-cpu.txt
else
    $pip install -q -r /build/requirements-gpu.txt
fi
# the installed versions must be the pinned ones: a grading image is only as good as its pins
/opt/venv/bin/python - "/build/requirements-$variant.txt" <<'PY'
import sys
from importlib.metadata import version
pins = {}
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if "==" in line:
        name, want = line.split("==")
        pins[name.strip()] = want.strip()
bad = [f"{n} {version(n)} (pinned {w})" for n, w in pins.items() if version(n).split("+")[0] != w.split("+")[0]]
if bad:
    sys.exit("install-deps: versions differ from the pins: " + ", ".join(bad))
import torch, triton  # noqa: E401  (they must import, not just be listed)
print(f"install-deps: torch {torch.__version__}, triton {triton.__version__}")
PY
# no byte-code caches written at grading time (the root filesystem is read-only there): compile now
/opt/venv/bin/python -m compileall -q -j 0 /opt/venv >/dev/null 2>&1 || true
