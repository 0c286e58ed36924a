#!/usr/bin/env bash
# Issue 49 on the GPU: a grade is a function of the submission alone. One call of at most 9 minutes
# that stands alone (device tool, carry [".whl"]); a `ROW ...` line per result as it lands.
#   1. FlashAttention alone, one grading at a time: the reference, the correct example (its backward
#      overwrites S with P), a plain PyTorch backward (tests/honest fa-einops-heads: S, P, dP, dS in
#      float32) and a torch.compile'd one (cs336-block-pointers): verdict, ratio per shape, peak
#      against budget per shape
#   2. the same four at once, twice (four `grader grade` processes on one GPU): the same verdicts,
#      ratios within 2% of (1), every result written
#   3. the memory-budget GPU tests (tests/grader/harness/test_memory_budget.py)
#   device run: benchmarks/budget_gpu.sh   (STEPS="1 2 3" by default)
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
RESULTS=${OUT:-/tmp/budget-gpu}
WORK=/tmp/budget-work
CALL_S=${CALL_S:-540}
mkdir -p "$RESULTS" "$WORK"
trap 'tar czf "$RESULTS/budget-gpu.tar.gz" -C "$WORK" . 2>/dev/null' EXIT
left() { echo $((CALL_S - SECONDS > 10 ? CALL_S - SECONDS : 10)); }
step() { echo; echo "== [$(date +%T), ${SECONDS} s] $*"; }
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-warn-script-location .whl/*.whl || exit 1; fi
echo "main $(git rev-parse --short HEAD 2>/dev/null || echo '(no git)')$(git diff --quiet 2>/dev/null || echo ' + uncommitted')"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
H=tests/honest/submissions
SUBS="reference=reference correct=examples/submissions/correct plain-bwd=$H/fa-einops-heads compiled-bwd=$H/cs336-block-pointers"
G="python3 -m grader.cli grade --problems flash_attention"
summary() { python3 benchmarks/budget_rows.py "$@"; }

grade_one() {  # grade_one LABEL PATH OUTDIR
  local label=$1 path=$2 out=$3
  ( /usr/bin/time -f "$label wall %e s" timeout "$(left)" $G "$path" --out "$out" >"$out.log" 2>&1; echo "exit $?" >>"$out.log" )
}

for s in ${STEPS:-1 2 3}; do
  case $s in
  1)
    step "FlashAttention alone, one at a time"
    for pair in $SUBS; do
      label=${pair%%=*}; path=${pair#*=}
      grade_one "$label" "$path" "$WORK/alone-$label"
      summary "alone $label" "$WORK/alone-$label"
    done ;;
  2)
    for round in 1 2; do
      step "the four at once, round $round"
      for pair in $SUBS; do
        label=${pair%%=*}; path=${pair#*=}
        grade_one "$label" "$path" "$WORK/four$round-$label" &
      done
      wait
      for pair in $SUBS; do
        label=${pair%%=*}
        summary "four$round $label" "$WORK/four$round-$label" "$WORK/alone-$label"
      done
    done ;;
  3)
    step "pytest -m gpu tests/grader/harness/test_memory_budget.py"
    timeout "$(left)" python3 -m pytest -q -m gpu -p no:cacheprovider tests/grader/harness/test_memory_budget.py 2>&1 | tail -n 15
    echo "ROW gpu-tests: exit ${PIPESTATUS[0]}" ;;
  esac
done
