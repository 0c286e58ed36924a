#!/usr/bin/env bash
# The project's one GPU driver: BLOCK picks what a device call runs (`bash benchmarks/gpu_block.sh`,
# or BLOCK as its first argument); each part keeps its own variables, defaults and outputs under $OUT:
#
#   BLOCK=1..6, t, r or a comma list of them   the GPU block of issue 42 (below); CALL_S, TESTS,
#                                              ONLY, REFERENCE_ALONE, SERVE_PROBLEMS, CLASS_ARGS, WORK
#   BLOCK=budget   issue 49's memory budgets; STEPS="1 2 3" (default; or 2,3), CALL_S (default 540)
#   BLOCK=cluster  issue 22's GPU half; STEPS=refcache,ray (default) or stash, REFCACHE, LOCAL_DIR,
#                  BATCH_TIMEOUT
#   BLOCK=service  `grader serve` driven as a class would; STUDENTS (10), PROBLEMS (gelu), PORT, DEVICE
#   BLOCK=check    any of the GPU steps by name; STEPS=handout,grade,... (default: all but class and
#                  profile), PROBLEMS, and each step's own (CORPORA_ARGS, CLASS_ARGS, KERNEL_ARGS, ...)
#
# A named part (budget, cluster, service, check) runs alone in its call; each one's own notes are
# above its function. Until issue 51 they were four scripts: benchmarks/budget_gpu.sh,
# cluster_gpu.sh, service_gpu.sh and gpu_check.sh (the dated logs in docs/gpu-runs/ name them so);
# `X.sh` with STEPS=... is now `BLOCK=budget|cluster|service|check STEPS=... gpu_block.sh`.
#
# BLOCK=1..6, t, r: the GPU block (issue 42): everything the grading path must show on the GPU, in
# priority order, in calls of at most 9 minutes that fit a session's 30 minutes of device time with
# one machine start.
# Each call stands alone: it installs the carried wheels, and where it needs the staff reference
# compiled it takes the archive from .out/refcache.tar.gz (carried) or builds it first. Every row
# prints one `ROW name: ok|NOT OK ...` line the moment it lands, so a call cut short still says
# what it saw (`grep ^ROW` of the log is the block's table).
#
#   device run, carry [".whl", ".out"]:  BLOCK=1 benchmarks/gpu_block.sh   (then 2, 3, ...; BLOCK=3,5
#   runs two in one call, sharing its CALL_S)
#   after call 1, copy its $OUT/refcache.tar.gz to .out/ here so the later calls carry it.
# The steps write under $WORK; the device tool brings back at most 8 files from $OUT, so the call
# ends by packing $WORK into $OUT/block<N>.tar.gz (the archive built, if any, beside it).
#
# Calls (the issue's rows):
#   1  the reference archive built; the correct example with its kernels cold, then warm (wall and
#      phases); REFERENCE_ALONE=1 also grades the reference as a submission here, by itself
#   2  both corpora as one class, every row against its expected verdict (--jobs auto), and the
#      reference graded as a student in the same class: 120/120 with every shape timed
#   3  the framework's `-m gpu` tests (the corpus tests aside: call 2 grades them)
#   4  (none: it measured compiles made aside, removed as slower, docs/performance.md)
#   5  `grader serve` on the GPU: test and benchmark mode, ten benchmark submissions queued at once,
#      each ratio against the one graded alone
#   6  the class at --jobs auto against one at a time (benchmarks/class_throughput.py)
#   t  named GPU tests after a fix: TESTS="tests/... ..." (pytest -m gpu)
#   r  a fix rerun: ONLY=entry,entry (corpus entries) as one class, the reference beside them
#
# A whole block in one session's 30 minutes (one start, the machine kept warm between calls;
# after call 1 copy its refcache.tar.gz to .out/ and carry it): BLOCK=1,3,5 CALL_S=560 (about
# 470 s on the H100), BLOCK=2 (about 480 s); BLOCK=6 needs a session of its own.
set -uo pipefail
cd "$(dirname "$0")/.."
BLOCK=${BLOCK:-${1:-1}}

# ---- BLOCK=budget: issue 49's memory budgets
# Issue 49 on the GPU: a grade is a function of the submission alone. One call of at most 9 minutes
# that stands alone (device tool, carry [".whl"]); a `ROW ...` line per result as it lands.
#   1. FlashAttention alone, one grading at a time: the reference, the correct example (its backward
#      overwrites S with P), a plain PyTorch backward (tests/honest fa-einops-heads: S, P, dP, dS in
#      float32) and a torch.compile'd one (cs336-block-pointers): verdict, ratio per shape, peak
#      against budget per shape
#   2. the same four at once, twice (four `grader grade` processes on one GPU): the same verdicts,
#      ratios within 2% of (1), every result written
#   3. the memory-budget GPU tests (tests/grader/engine/harness/test_memory_budget.py)
#   device run: BLOCK=budget bash benchmarks/gpu_block.sh   (STEPS="1 2 3" by default; STEPS=2,3 as well)
part_budget() {
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

STEPS=${STEPS:-1 2 3}
for s in ${STEPS//,/ }; do  # "2 3" or 2,3
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
    step "pytest -m gpu tests/grader/engine/harness/test_memory_budget.py"
    timeout "$(left)" python3 -m pytest -q -m gpu -p no:cacheprovider tests/grader/engine/harness/test_memory_budget.py 2>&1 | tail -n 15
    echo "ROW gpu-tests: exit ${PIPESTATUS[0]}" ;;
  esac
done
}

# ---- BLOCK=cluster: issue 22's GPU half
# The GPU half of issue 22, on one GPU machine; logs and JSON under $OUT.
#   refcache: a student's first grading with every cache empty, then another student's first
#             grading (its own kernel cache empty) with the reference cache that the first one
#             left: what compiling and tuning the reference once per machine saves
#   ray:      `grader batch --backend ray` (a Ray instance started for the batch, one GPU) on the
#             bundled examples with timing on, beside `--gpus 0` (the local subprocess runner)
#   stash:    keep the half of Ray's wheel this call carried (.ray-wheels/, scripts/ray-wheels.sh)
#             in /tmp for the next call to the same warm machine; the ray step joins the halves,
#             checks the joined wheel's sha256 and installs Ray and its dependencies from them
#   BLOCK=cluster STEPS=refcache,ray benchmarks/gpu_block.sh
# Both batches give each problem BATCH_TIMEOUT seconds (default 120): the bundled `broken` example's
# matmul never returns and would otherwise hold its batch for the spec's limit (600 s). LOCAL_DIR
# names a local batch of the examples an earlier call to the same machine left (it is not graded again).
part_cluster() {
OUT=${OUT:-/tmp/cluster-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
STEPS=${STEPS:-refcache,ray}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
step() { echo; echo "== [$(date +%T)] $*"; }
seconds() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['duration_s'])" "$1"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

if has refcache; then
  # REFCACHE names the (empty) folder to fill, to keep it for later steps or calls; else a temporary one
  export GRADER_REFERENCE_CACHE=${REFCACHE:-$(mktemp -d)}
  mkdir -p "$GRADER_REFERENCE_CACHE"
  step "first grading, every cache empty (reference cache: $GRADER_REFERENCE_CACHE)"
  start=$(date +%s.%N)
  GRADER_TRACE=1 GRADER_KERNEL_CACHE=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d) \
    python3 -m grader.cli grade examples/submissions/correct --out "$OUT/refcache-cold" --device cuda >"$OUT/refcache-cold.log" 2>&1
  cold=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  python3 -m grader.cli reference-cache path
  du -sh "$GRADER_REFERENCE_CACHE"
  step "another first grading (empty kernel cache), the reference cache present"
  start=$(date +%s.%N)
  GRADER_TRACE=1 GRADER_KERNEL_CACHE=$(mktemp -d) \
    python3 -m grader.cli grade examples/submissions/correct --out "$OUT/refcache-warm" --device cuda >"$OUT/refcache-warm.log" 2>&1
  warm=$(python3 -c "import time; print(round(time.time() - $start, 1))")
  echo "wall: cold $cold s, with the reference cache $warm s"
  echo "grading duration_s: cold $(seconds "$OUT/refcache-cold/result.json"), with the reference cache $(seconds "$OUT/refcache-warm/result.json")"
  python3 - "$OUT" <<'EOF'
import json, sys
out = sys.argv[1]
for name in ("refcache-cold", "refcache-warm"):
    r = json.load(open(f"{out}/{name}/result.json"))
    print(name, "score", r["score"], {p["name"]: round(p["score"], 2) for p in r["problems"]})
EOF
  grep -h "reference and PyTorch: inputs, warm-up" "$OUT"/refcache-*.log | head -n 20
  [ -n "${REFCACHE:-}" ] || unset GRADER_REFERENCE_CACHE
fi

STASH=/tmp/ray-wheel-parts
if [ -d .ray-wheels ]; then  # whichever half this call carried
  mkdir -p "$STASH" && cp -r .ray-wheels/*/. "$STASH"/ && echo "ray wheels kept: $(ls "$STASH" | tr '\n' ' ')"
fi
if has ray && [ -f "$STASH/manifest" ] && ! python3 -c "import ray" 2>/dev/null; then
  IFS=$'\t' read -r wheel sha parts < "$STASH/manifest"
  if [ "$(ls "$STASH/$wheel".part-* 2>/dev/null | wc -l)" -ne "$parts" ]; then
    echo "ray: $(ls "$STASH/$wheel".part-* 2>/dev/null | wc -l) of $parts halves of $wheel here: carry the other"
  else
    cat "$STASH/$wheel".part-* > "$STASH/$wheel"
    if [ "$(sha256sum "$STASH/$wheel" | cut -d' ' -f1)" = "$sha" ]; then
      python3 -m pip install -q --no-index --find-links "$STASH" --no-warn-script-location ray submitit \
        && echo "ray installed: $(python3 -c 'import ray; print(ray.__version__)')"
    else
      echo "ray: the joined $wheel does not match its sha256; carry both halves again"
    fi
  fi
fi

if has ray; then
  if ! python3 -c "import ray, submitit" 2>/dev/null; then
    echo "ray step skipped: no ray here (carry its wheels in .whl/ and pip install them: pip install --no-index .whl/*.whl)"
  else
    # LOCAL_DIR: a local batch of the same class graded by an earlier call to this machine is kept
    LOCAL_DIR=${LOCAL_DIR:-$OUT/batch-local}
    if [ -f "$LOCAL_DIR/gradebook.csv" ]; then
      step "grader batch --gpus 0: kept from an earlier call ($LOCAL_DIR)"
    else
      step "grader batch --gpus 0 (local subprocess runner)"
      start=$(date +%s.%N)
      python3 -m grader.cli batch examples/submissions --out "$LOCAL_DIR" --device cuda --gpus 0 --timeout "${BATCH_TIMEOUT:-120}" >"$OUT/batch-local.log" 2>&1
      echo "local: $(python3 -c "import time; print(round(time.time() - $start, 1))") s"
    fi
    cat "$LOCAL_DIR/gradebook.csv"
    step "grader batch --backend ray (one GPU)"
    start=$(date +%s.%N)
    RAY_USAGE_STATS_ENABLED=0 python3 -m grader.cli batch examples/submissions --out "$OUT/batch-ray" --device cuda --backend ray --timeout "${BATCH_TIMEOUT:-120}" >"$OUT/batch-ray.log" 2>&1
    echo "ray: $(python3 -c "import time; print(round(time.time() - $start, 1))") s"; cat "$OUT/batch-ray/gradebook.csv"
    step "the same verdicts? (every student's problems: status and whether timing measured)"
    python3 - "$LOCAL_DIR" "$OUT/batch-ray" <<'PY'
import json, sys
from pathlib import Path
def verdicts(folder):
    found = {}
    for result in sorted(Path(folder).glob("*/result.json")):
        for p in json.loads(result.read_text())["problems"]:
            perf = p.get("performance") or {}
            found[(result.parent.name, p["name"])] = (p["status"], perf.get("status"), perf.get("ratio_geomean"))
    return found
local, ray = verdicts(sys.argv[1]), verdicts(sys.argv[2])
for key in sorted(set(local) | set(ray)):
    a, b = local.get(key), ray.get(key)
    same = a is not None and b is not None and a[:2] == b[:2]
    print(*key, a, b, "same" if same else "DIFFERENT")
print("verdicts:", "all the same" if local.keys() == ray.keys() and all(local[k][:2] == ray[k][:2] for k in local) else "DIFFER")
PY
  fi
fi
}

# ---- BLOCK=service: `grader serve` on the GPU
# `grader serve` on the GPU machine, driven as a class would drive it (issue 31; docs/performance.md):
# tokens for STUDENTS students and a TA, the bundled correct example submitted by one student in
# test mode twice (its kernels cold, then warm) and in benchmark mode, then STUDENTS submissions
# queued at once in benchmark mode, served one at a time for timing; the staff queue at the end.
# Times from `grader submit` to its printed result; the server's GRADER_TRACE log in $OUT/serve.log.
#   BLOCK=service OUT=/tmp/svc STUDENTS=10 PROBLEMS=gelu benchmarks/gpu_block.sh
part_service() {
OUT=${OUT:-/tmp/service-gpu}
STUDENTS=${STUDENTS:-10}
PROBLEMS=${PROBLEMS:-gelu}
PORT=${PORT:-8765}
DEVICE=${DEVICE:-cuda}  # cpu: the script's own check here (benchmark mode needs a GPU)
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
G="python3 -m grader.cli"
URL=http://127.0.0.1:$PORT
DB=$OUT/svc.sqlite
rm -f "$DB" "$OUT"/s*.log
printf 'student_id\n' > "$OUT/roster.csv"
for i in $(seq 0 $((STUDENTS - 1))); do echo "s$i" >> "$OUT/roster.csv"; done
$G tokens --db "$DB" --roster "$OUT/roster.csv" --staff ta --out "$OUT/tokens.csv" || exit 1
token() { python3 -c "import csv,sys; print(next(r['token'] for r in csv.DictReader(open(sys.argv[1])) if r['student_id'] == sys.argv[2]))" "$OUT/tokens.csv" "$1"; }
GRADER_TRACE=1 $G serve --db "$DB" --port "$PORT" --device "$DEVICE" --quota 100 > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null' EXIT
for _ in $(seq 1 60); do python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$URL/" 2>/dev/null && break; sleep 0.5; done
T0=$(token s0)
for run in "test, its kernels cold" "test, warm" ; do
  echo "== grader submit correct --mode test --problems $PROBLEMS ($run)"
  /usr/bin/time -f "submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T0" \
      --problems "$PROBLEMS" --no-tests 2>&1 | tail -n 12
done
echo "== grader submit correct --mode benchmark --problems $PROBLEMS"
/usr/bin/time -f "submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T0" \
    --problems "$PROBLEMS" --no-tests --mode benchmark 2>&1 | tail -n 12
echo "== $STUDENTS students submit at once (benchmark mode)"
started=$(date +%s.%N)
for i in $(seq 0 $((STUDENTS - 1))); do
  T=$(token "s$i")
  ( /usr/bin/time -f "s$i submit to result: %e s" $G submit examples/submissions/correct --server "$URL" --token "$T" \
      --problems "$PROBLEMS" --no-tests --mode benchmark > "$OUT/s$i.log" 2>&1 ) &
done
wait $(jobs -p | grep -v "^$SERVER$") 2>/dev/null
python3 -c "import sys,time; print(f'all {sys.argv[2]} results in {time.time() - float(sys.argv[1]):.1f} s')" "$started" "$STUDENTS"
grep -h "submit to result\|ratio\|score" "$OUT"/s*.log | head -n 40
echo "== the staff queue afterwards"
python3 -c "
import sys, urllib.request
req = urllib.request.Request(sys.argv[1] + '/api/staff/queue', headers={'Authorization': 'Bearer ' + sys.argv[2]})
print(urllib.request.urlopen(req, timeout=10).read().decode()[:3000])" "$URL" "$(token ta)"
echo "== every job: queued, started, finished (s after the first was queued), its gelu ratio and score"
python3 - "$DB" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute(
    "select id, person_id, mode, state, created_at, started_at, finished_at, result from jobs order by id").fetchall()
t0 = min(r[4] for r in rows)
for id_, who, mode, state, created, started, finished, result in rows:
    r = json.loads(result) if result else {}
    ratios = [f"{p['name']} {p['performance'].get('ratio_geomean') or 0:.3f}" for p in r.get("problems", []) if p.get("performance")]
    at = lambda t: f"{t - t0:7.1f}" if t else "      -"
    print(f"#{id_:<3} {who:<4} {mode:<9} {state:<7} {at(created)} {at(started)} {at(finished)}  score {r.get('score', '-')}  {', '.join(ratios)}")
PY
}

# ---- BLOCK=check: the GPU steps by name
# Everything that needs the GPU, in one or two runs (the lent H200 is scarce): the handout tests and
# the grader on CUDA, the grader's timing noise and its agreement with do_bench, a batch on the GPU,
# the kernel benchmarks, the framework's GPU tests. Logs, tables and JSON go under $OUT.
#   BLOCK=check STEPS=handout,grade,noise,tests benchmarks/gpu_block.sh
#   BLOCK=check STEPS=agreement,batch,kernels,handoutbench benchmarks/gpu_block.sh
#   BLOCK=check STEPS=refcache,correct,corpora benchmarks/gpu_block.sh   (a class on one GPU: issue 27)
# Steps: refcache fill handout handoutbench grade correct noise unverified corpora class profile agreement
# batch kernels attention tests (default: all but class and profile); windowtrial classstart classwait
# (a class longer than one call, below) only when named.
# The reference cache travels between lent machines as one archive: step refcache writes
# $OUT/refcache.tar.gz (`grader reference-cache build --out`); set GRADER_REFERENCE_ARCHIVE to a
# copy of it in a later call and no grading there autotunes the reference again.
part_check() {
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD OUT
STEPS=${STEPS:-refcache,fill,handout,handoutbench,grade,correct,noise,unverified,corpora,agreement,batch,kernels,attention,tests}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
step() { echo; echo "== [$(date +%T)] $*"; }
# .whl/ carries the wheels the GPU machine (no network) lacks, among them einops, the one allowed import
# beyond torch, triton and numpy (assignment.toml [environment]); fetch it where there is a network:
#   pip download --no-deps --only-binary=:all: -d .whl einops==0.8.2
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-warn-script-location .whl/*.whl; fi
# every problem of the spec, in its order (PROBLEMS=gelu,softmax picks some); after the wheels: the spec needs pydantic
PROBLEMS=${PROBLEMS:-$(python3 -c "from grader.engine.assignment.load import load_assignment; print(','.join(p.name for p in load_assignment(hidden=False).problems))")}
python3 -c "from grader.engine.spec import versions; d = versions.differences(versions.graded()); print('environment:', '; '.join(d) or 'the grading pair')"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"
K=$(echo "$PROBLEMS" | sed 's/,/ or /g')
if has refcache; then
  step "grader reference-cache build --out \$OUT/refcache.tar.gz (the reference compiled and tuned once)"
  /usr/bin/time -f "wall %e s" python3 -m grader.cli reference-cache build --out "$OUT/refcache.tar.gz" 2>&1 | tail -n 8
fi
if has correct; then
  # the bundled correct example: first with its own kernels cold (the reference cache warm), then warm
  for run in cold warm; do
    step "grader grade examples/submissions/correct ($run student kernels)"
    GRADER_TRACE=1 /usr/bin/time -f "wall %e s" python3 -m grader.cli grade examples/submissions/correct \
        --out "$OUT/correct-$run" --problems "$PROBLEMS" 2>"$OUT/trace-correct-$run.log" | tail -n 9
    tail -n 1 "$OUT/trace-correct-$run.log"
  done
fi
if has fill; then
  # the refill of verified timing: PyTorch's normal_ against a counter-hash candidate (docs/performance.md)
  step "benchmarks/fill_speed.py"
  python3 benchmarks/fill_speed.py 2>&1 | tail -n 12
fi
if has handout; then
  step "pytest handout --submission reference (CUDA)"
  python3 -m pytest handout --submission reference -q -p no:cacheprovider -k "$K" 2>&1 | tail -n 15
fi
if has handoutbench; then
  # Two runs: the second compares itself with the first, as a student does after a change.
  STORE="file://$(mktemp -d)"
  step "pytest handout --submission reference --benchmark-only --benchmark-save"
  python3 -m pytest handout --submission reference -q -p no:cacheprovider --benchmark-only -k "$K" \
      --benchmark-columns=median,iqr,rounds --benchmark-storage="$STORE" --benchmark-save=first 2>&1 | tail -n 40
  step "pytest handout --submission reference --benchmark-only --benchmark-compare"
  python3 -m pytest handout --submission reference -q -p no:cacheprovider --benchmark-only -k "$K" \
      --benchmark-columns=median,iqr,rounds --benchmark-storage="$STORE" --benchmark-compare \
      --benchmark-json="$OUT/handout-bench.json" 2>&1 | tail -n 70
fi
if has grade; then
  step "grader grade reference (CUDA, timing; first run: cold Triton caches)"
  /usr/bin/time -f "wall %e s" python3 -m grader.cli grade reference --out "$OUT/ref1" --problems "$PROBLEMS" 2>&1 | tail -n 20
fi
if has noise; then
  step "grader grade reference, second run (noise; warm caches)"
  # GRADER_TRACE: where the warm grading's wall time goes, phase by phase, in trace.log
  GRADER_TRACE=1 /usr/bin/time -f "wall %e s" python3 -m grader.cli grade reference --out "$OUT/ref2" --problems "$PROBLEMS" 2>"$OUT/trace.log" | tail -n 12
  tail -n 1 "$OUT/trace.log"
  if [ ! -f "$OUT/ref1/result.json" ]; then
    echo "no first grading in $OUT/ref1 (step grade not run in this call): compare later with benchmarks/noise_report.py"
  else
    python3 benchmarks/noise_report.py "$OUT/ref1/result.json" "$OUT/ref2/result.json" | tee "$OUT/noise.md"
  fi
  python3 - "$OUT" <<'PY'
import json, os, sys
for run in ("ref1", "ref2"):
    if not os.path.exists(f"{sys.argv[1]}/{run}/result.json"):
        continue
    r = json.load(open(f"{sys.argv[1]}/{run}/result.json"))
    print(run, "total", r["score"], "/", r["max_score"], "duration", r["duration_s"], "s;",
          ", ".join(f"{p['name']} {p['duration_s']:.1f} s" for p in r["problems"]))
PY
fi
if has unverified; then
  # what verified timing costs: the same warm grading with rounds as before it (no new contents,
  # no checked outputs), for the wall time and for the ratios (docs/performance.md)
  step "grader grade reference, unverified timing (GRADER_UNVERIFIED_TIMING=1; warm caches)"
  GRADER_UNVERIFIED_TIMING=1 GRADER_TRACE=1 /usr/bin/time -f "wall %e s" python3 -m grader.cli grade reference --out "$OUT/ref3" --problems "$PROBLEMS" 2>"$OUT/trace-unverified.log" | tail -n 4
  tail -n 1 "$OUT/trace-unverified.log"
  [ -f "$OUT/ref2/result.json" ] && python3 benchmarks/noise_report.py "$OUT/ref3/result.json" "$OUT/ref2/result.json" | tee "$OUT/verified-vs-unverified.md"
  python3 - "$OUT" <<'PY'
import json, os, sys
for run in ("ref1", "ref2", "ref3"):
    path = f"{sys.argv[1]}/{run}/result.json"
    if os.path.exists(path):
        r = json.load(open(path))
        shapes = [s for p in r["problems"] for s in (p["performance"] or {}).get("shapes", [])]
        print(run, "duration", r["duration_s"], "s; rounds", sum(s["rounds"] for s in shapes), "checked", sum(s.get("verified_rounds", 0) for s in shapes))
PY
fi
if has corpora; then
  step "both corpora on the GPU as one class, --jobs ${CORPORA_JOBS:-auto} (benchmarks/corpora_table.py)"
  # no tail: rows print as they land, so a run cut short by its time limit still shows them
  /usr/bin/time -f "wall %e s" python3 benchmarks/corpora_table.py --out "$OUT/corpora" --jobs "${CORPORA_JOBS:-auto}" \
      ${CORPORA_ARGS:-} 2>&1
fi
if has class; then
  step "a class on one GPU: --jobs auto against --jobs 1 (benchmarks/class_throughput.py)"
  python3 benchmarks/class_throughput.py --out "$OUT/class" ${CLASS_ARGS:-} 2>&1 | tail -n 60
fi
# A class longer than one call (ten minutes): STEPS=classstart starts it in the background, on a copy
# of the tree in $KEEP (which outlives the call on a warm machine), and STEPS=classwait in the next
# calls to the same machine waits for it (CLASS_WAIT_S at most) and copies what it wrote to $OUT.
KEEP=${KEEP:-/tmp/gpu-keep}
if has windowtrial; then
  # the reference against itself, twice, with thresholds.window_s = WINDOW_S on every problem; the
  # class then runs with that window if both gradings' geomeans lie within 2% of 1, else the spec's
  step "the reference against itself with window_s = ${WINDOW_S:-0.125} (benchmarks/spec_variant.py)"
  mkdir -p "$KEEP"
  python3 benchmarks/spec_variant.py --out "$KEEP/spec-window" "window_s=${WINDOW_S:-0.125}"
  for run in w1 w2; do
    GRADER_TRACE=1 /usr/bin/time -f "wall %e s" python3 -m grader.cli grade reference --out "$OUT/$run" \
        --problems "$PROBLEMS" --spec "$KEEP/spec-window/assignment.toml" 2>"$OUT/trace-$run.log" | tail -n 3
    tail -n 1 "$OUT/trace-$run.log"
  done
  if python3 benchmarks/noise_report.py "$OUT/w1/result.json" "$OUT/w2/result.json" --within 0.02 | tee "$OUT/window-noise.md"; then
    echo "$KEEP/spec-window/assignment.toml" > "$KEEP/class-spec"
  else
    echo "assignment/assignment.toml" > "$KEEP/class-spec"
  fi
  echo "the class will be graded with $(cat "$KEEP/class-spec")"
fi
if has classstart; then
  step "the class in the background: benchmarks/class_throughput.py ${CLASS_ARGS:-} (log: $KEEP/class.log)"
  rm -rf "$KEEP/src" "$KEEP/class" && mkdir -p "$KEEP/src"
  tar --exclude=./.whl --exclude=./.git -cf - . | tar -C "$KEEP/src" -xf -
  spec=$(cat "$KEEP/class-spec" 2>/dev/null || echo assignment/assignment.toml)
  case "$spec" in /*) ;; *) spec="$KEEP/src/$spec" ;; esac
  # the whole subshell's output goes to the log: a pipe left open to this script's caller would
  # hold the call until the class ended (session 19)
  (cd "$KEEP/src" && exec setsid python3 benchmarks/class_throughput.py --out "$KEEP/class" --spec "$spec" \
      ${CLASS_ARGS:-}) >"$KEEP/class.log" 2>&1 </dev/null &
  sleep 2
  echo "started ($(pgrep -f "class_throughput.py --out $KEEP/class" | tr '\n' ' ')), spec $spec"
fi
if has classwait; then
  step "waiting for the class (at most ${CLASS_WAIT_S:-540} s)"
  end=$((SECONDS + ${CLASS_WAIT_S:-540}))
  # CLASS_WAIT_S must end before the call's limit (less than asked when the session's device time is
  # short: `run` reports limit_s), or what the class wrote is not copied back
  running() { pgrep -f "class_throughput.py --out $KEEP/class" >/dev/null; }
  while running && [ $SECONDS -lt $end ]; do sleep 5; done
  running && echo "still running" || echo "finished"
  tail -n 70 "$KEEP/class.log"
  # a call brings back a few files only: the report, the walls and the log as they are, the
  # records (result.json, gradebooks, summaries, batch logs) as one archive
  mkdir -p "$OUT/class"
  cp "$KEEP/class.log" "$KEEP/class/class.md" "$KEEP/class/walls.json" "$OUT/class/" 2>/dev/null
  (cd "$KEEP/class" 2>/dev/null && find . -maxdepth 5 \( -name '*.json' -o -name '*.csv' -o -name '*.log' \) \
      -not -path './work/*' | tar -czf "$OUT/class/records.tar.gz" -T -)
fi
if has profile; then
  # the profile mode (issue 31): one warm call per benchmark shape, kernels by name and time
  step "grader grade examples/submissions/correct --profile --no-timing"
  python3 -m grader.cli grade examples/submissions/correct --out "$OUT/profile" --problems "$PROBLEMS" --profile \
      --no-timing 2>&1 | tail -n 60
  python3 -m pytest -q -p no:cacheprovider tests/grader/engine/harness/test_kernel_profile.py \
      tests/grader/engine/orchestrator/test_grade.py -k profile 2>&1 | tail -n 5
fi
if has agreement; then
  step "timing agreement with do_bench"
  python3 benchmarks/timing_agreement.py --problems "$PROBLEMS" 2>&1 | tail -n 20
fi
if has batch; then
  step "grader batch examples/submissions --gpus all (no Docker)"
  /usr/bin/time -f "wall %e s" python3 -m grader.cli batch examples/submissions --out "$OUT/batch" --gpus all \
      --problems "${BATCH_PROBLEMS:-gelu,softmax}" 2>&1 | tail -n 25
  cat "$OUT/batch/gradebook.csv"
fi
if has kernels; then
  step "benchmarks/bench_softmax_matmul.py"
  python3 benchmarks/bench_softmax_matmul.py ${KERNEL_ARGS:---skip-checks --sweep gelu --sweep-budget 60} 2>&1 | tail -n 45
fi
if has attention; then
  step "benchmarks/bench_attention.py"
  python3 benchmarks/bench_attention.py 2>&1 | tail -n 40
fi
if has tests; then
  step "GPU tests of the framework"
  # GPU_TESTS narrows it (files or folders): GPU_TESTS=tests/grader/engine/orchestrator STEPS=tests
  python3 -m pytest ${GPU_TESTS:-tests} -q -p no:cacheprovider -m gpu -rs 2>&1 | tail -n 25
  # REFERENCE_TESTS picks the reference's own tests (they run only where GPU_TESTS is unset or it is set)
  if [ -z "${GPU_TESTS:-}" ] || [ -n "${REFERENCE_TESTS:-}" ]; then
    step "reference kernel tests on CUDA (${REFERENCE_TESTS:-tests/reference}: in-process on the GPU)"
    python3 -m pytest ${REFERENCE_TESTS:-tests/reference} -q -p no:cacheprovider -x 2>&1 | tail -n 15
  fi
fi
step "done"
}

# a named part runs alone, with its own variables and defaults, and ends the call
case "$BLOCK" in
  budget|cluster|service|check) "part_$BLOCK"; exit ;;
esac

# ---- BLOCK=1..6, t, r or a comma list of them: the GPU block of issue 42
RESULTS=${OUT:-}
OUT=${WORK:-/tmp/gpu-block}
# the call's own limit: every step is given what is left of it, so the call returns before the
# device tool's and brings back what it wrote
CALL_S=${CALL_S:-530}
mkdir -p "$OUT" .out
pack() {
  [ -n "$RESULTS" ] || return 0
  mkdir -p "$RESULTS"
  tar czf "$RESULTS/block${BLOCK//,/-}.tar.gz" -C "$OUT" --exclude=refcache.tar.gz . 2>/dev/null
  [ -f "$OUT/refcache.tar.gz" ] && cp "$OUT/refcache.tar.gz" "$RESULTS/"
  return 0
}
trap pack EXIT
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD OUT
left() { echo $((CALL_S - SECONDS > 10 ? CALL_S - SECONDS : 10)); }
step() { echo; echo "== [$(date +%T), ${SECONDS} s into call $BLOCK] $*"; }
row() { python3 benchmarks/block_rows.py "$@"; }
G="python3 -m grader.cli"
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-warn-script-location .whl/*.whl || exit 1; fi
echo "main $(git rev-parse --short HEAD 2>/dev/null || echo '(no git)')$(git diff --quiet 2>/dev/null || echo ' + uncommitted')"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader
python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"

archive() {
  # the reference compiled and tuned once; carried in .out/ between calls, built where it is not
  if [ -f .out/refcache.tar.gz ]; then
    export GRADER_REFERENCE_ARCHIVE=$PWD/.out/refcache.tar.gz
    echo "reference archive: carried ($(du -h .out/refcache.tar.gz | cut -f1))"
    return
  fi
  step "grader reference-cache build --out \$OUT/refcache.tar.gz"
  /usr/bin/time -f "wall %e s" timeout "$(left)" $G reference-cache build --out "$OUT/refcache.tar.gz" 2>&1 | tail -n 8
  if [ -f "$OUT/refcache.tar.gz" ]; then
    cp "$OUT/refcache.tar.gz" .out/refcache.tar.gz
    export GRADER_REFERENCE_ARCHIVE=$PWD/.out/refcache.tar.gz
    echo "ROW reference-archive: ok $(du -h .out/refcache.tar.gz | cut -f1) in $SECONDS s"
  else
    echo "ROW reference-archive: NOT OK not built"
  fi
}

grade() {
  # grade SUBMISSION NAME [grader grade options]: traced, limited to what is left of the call
  local sub=$1 name=$2
  shift 2
  step "grader grade $sub $* ($name)"
  GRADER_TRACE=1 /usr/bin/time -f "wall %e s" timeout "$(left)" $G grade "$sub" --out "$OUT/$name" "$@" \
      2>"$OUT/trace-$name.log" | tail -n 8
  grep "^wall" "$OUT/trace-$name.log" || tail -n 3 "$OUT/trace-$name.log"
}

corpora() {
  # corpora NAME: both corpora as one class; every row prints as it lands
  step "both corpora as one class, --jobs auto ($1)"
  timeout "$(left)" python3 benchmarks/corpora_table.py --out "$OUT/$1" --jobs auto ${ONLY:+--only "$ONLY"} --reference 2>&1
  local rc=$?
  if [ -f "$OUT/$1/corpora.md" ]; then
    echo "ROW $1: $([ $rc = 0 ] && echo ok || echo 'NOT OK') $(grep -E 'gradings, .* at once' "$OUT/$1/corpora.md"); $(grep -E '^(did not run|every entry ran)' "$OUT/$1/corpora.md")"
  else
    echo "ROW $1: NOT OK cut short at ${SECONDS} s (rc $rc): the rows above are what landed"
  fi
}

one_block() {
case "$1" in
1)
  archive
  grade examples/submissions/correct correct-cold
  row seen correct-cold "$OUT/correct-cold/result.json"
  grade examples/submissions/correct correct-warm
  row same correct-warm-vs-cold "$OUT/correct-warm/result.json" "$OUT/correct-cold/result.json"
  if [ -n "${REFERENCE_ALONE:-}" ]; then  # else call 2 grades it in the class (its `the staff reference` row)
    grade reference reference
    row full reference "$OUT/reference/result.json"
  fi
  ;;
2)
  archive
  corpora corpora
  ;;
3)
  archive
  step "the framework's GPU tests (pytest -m gpu; the corpus tests are call 2's)"
  timeout "$(left)" python3 -m pytest tests -q -p no:cacheprovider -m gpu -rs \
      --ignore=tests/adversarial/test_corpus.py --ignore=tests/honest/test_corpus.py 2>&1 | tee "$OUT/gpu-tests.log" | tail -n 30
  summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error)" "$OUT/gpu-tests.log" | tail -n 1)
  if grep -qE "[0-9]+ (failed|error)" <<<"$summary" || [ -z "$summary" ]; then echo "ROW gpu-tests: NOT OK ${summary:-cut short}"
  else echo "ROW gpu-tests: ok $summary"; fi
  ;;
5)
  archive
  step "grader serve on the GPU (BLOCK=service, ten students)"
  BLOCK=service OUT=$OUT/service STUDENTS=10 PROBLEMS=${SERVE_PROBLEMS:-gelu} timeout "$(left)" bash benchmarks/gpu_block.sh 2>&1 | tail -n 60
  python3 - "$OUT/service/svc.sqlite" <<'PY'
import json, sqlite3, sys
rows = sqlite3.connect(sys.argv[1]).execute("select id, mode, state, result from jobs order by id").fetchall()
bench = [(i, json.loads(r)) for i, mode, state, r in rows if mode == "benchmark" and state in ("done", "graded") and r]
ratio = lambda r: {p["name"]: (p.get("performance") or {}).get("ratio_geomean") for p in r["problems"]}
if len(bench) < 2:
    print(f"ROW serve: NOT OK {len(bench)} benchmark result(s) of {len(rows)} jobs")
    raise SystemExit(1)
alone, queued = ratio(bench[0][1]), [ratio(r) for _, r in bench[1:]]
worst = max(abs(q[k] / alone[k] - 1) for q in queued for k in alone if alone[k] and q.get(k))
print(f"ROW serve: {'ok' if worst <= 0.02 and len(queued) >= 10 else 'NOT OK'} {len(queued)} queued benchmark "
      f"results; alone {alone}; widest ratio against alone {worst:.1%}")
PY
  ;;
6)
  archive
  step "the class at --jobs auto against one at a time (benchmarks/class_throughput.py)"
  timeout "$(left)" python3 benchmarks/class_throughput.py --out "$OUT/class" --timeout 240 ${CLASS_ARGS:-} 2>&1 | tail -n 40
  ;;
t)
  # named GPU tests after a fix: TESTS="path ..." (default the share's lift)
  archive
  step "pytest -m gpu ${TESTS:=tests/grader/engine/harness/test_memory_share.py}"
  # shellcheck disable=SC2086
  timeout "$(left)" python3 -m pytest $TESTS -q -p no:cacheprovider -m gpu -rs 2>&1 | tee "$OUT/gpu-tests-t.log" | tail -n 30
  summary=$(grep -E "^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error)" "$OUT/gpu-tests-t.log" | tail -n 1)
  if grep -qE "[0-9]+ (failed|error)" <<<"$summary" || [ -z "$summary" ]; then echo "ROW named-gpu-tests: NOT OK ${summary:-cut short}"
  else echo "ROW named-gpu-tests: ok $summary"; fi
  ;;
r)
  # a fix rerun: the corpus entries named in ONLY, the reference graded as a student beside them
  archive
  corpora rerun
  ;;
*)
  echo "gpu_block: BLOCK is 1-3, 5, 6, t, r or a comma list of them, or one of budget, cluster, service, check alone; not '$1'" >&2
  exit 2
  ;;
esac
}
IFS=, read -ra BLOCKS <<<"$BLOCK"
for b in "${BLOCKS[@]}"; do one_block "$b"; done
step "done"
