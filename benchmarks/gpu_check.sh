#!/usr/bin/env bash
# Everything that needs the GPU, in one or two runs (the lent H200 is scarce): the handout tests and
# the grader on CUDA, the grader's timing noise and its agreement with do_bench, a batch on the GPU,
# the kernel benchmarks, the framework's GPU tests. Logs, tables and JSON go under $OUT.
#   STEPS=handout,grade,noise,tests benchmarks/gpu_check.sh
#   STEPS=agreement,batch,kernels,handoutbench benchmarks/gpu_check.sh
#   STEPS=refcache,correct,corpora benchmarks/gpu_check.sh   (a class on one GPU: issue 27)
# Steps: refcache fill handout handoutbench grade correct noise unverified corpora class profile agreement
# batch kernels attention tests (default: all but class and profile); windowtrial classstart classwait
# (a class longer than one call, below) only when named.
# The reference cache travels between lent machines as one archive: step refcache writes
# $OUT/refcache.tar.gz (`grader reference-cache build --out`); set GRADER_REFERENCE_ARCHIVE to a
# copy of it in a later call and no grading there autotunes the reference again.
set -uo pipefail
cd "$(dirname "$0")/.."
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
PROBLEMS=${PROBLEMS:-$(python3 -c "from grader.spec.load import load_assignment; print(','.join(p.name for p in load_assignment(hidden=False).problems))")}
python3 -c "from grader.spec import versions; d = versions.differences(versions.graded()); print('environment:', '; '.join(d) or 'the grading pair')"
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
  python3 -m pytest -q -p no:cacheprovider tests/grader/harness/test_kernel_profile.py \
      tests/grader/orchestrator/test_grade.py -k profile 2>&1 | tail -n 5
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
  # GPU_TESTS narrows it (files or folders): GPU_TESTS=tests/grader/orchestrator STEPS=tests
  python3 -m pytest ${GPU_TESTS:-tests} -q -p no:cacheprovider -m gpu -rs 2>&1 | tail -n 25
  # REFERENCE_TESTS picks the reference's own tests (they run only where GPU_TESTS is unset or it is set)
  if [ -z "${GPU_TESTS:-}" ] || [ -n "${REFERENCE_TESTS:-}" ]; then
    step "reference kernel tests on CUDA (${REFERENCE_TESTS:-tests/reference}: in-process on the GPU)"
    python3 -m pytest ${REFERENCE_TESTS:-tests/reference} -q -p no:cacheprovider -x 2>&1 | tail -n 15
  fi
fi
step "done"
