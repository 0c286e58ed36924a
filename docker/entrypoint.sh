#!/bin/sh
# The grading container's entrypoint: runs the grader (as root) with the given arguments, e.g.
#   grade /submission --out /out --device cpu --worker-user grader-worker
# The grader drops every worker it starts to the unprivileged user grader-worker; the reference
# and the hidden cases in /opt/grader are readable by root only. The secret arrives in the
# environment (GRADER_SECRET), never on the command line. When GRADER_OUT_OWNER (uid:gid) is set,
# /out is handed to that host user afterwards so a non-root batch can clean it up.
set -u
export PYTHONPATH=/opt/grader
export HOME="${HOME:-/tmp/grader-home}"
export TRITON_CACHE_DIR="${TRITON_CACHE_DIR:-$HOME/.triton}"
mkdir -p "$HOME"
/opt/venv/bin/python -m grader.cli "$@"
status=$?
if [ -n "${GRADER_OUT_OWNER:-}" ] && [ -d /out ]; then
    chown -R "$GRADER_OUT_OWNER" /out 2>/dev/null || true
fi
exit "$status"
