#!/usr/bin/env bash
# The GPU half of issue 22, on one GPU machine; logs and JSON under $OUT.
#   refcache: a student's first grading with every cache empty, then another student's first
#             grading (its own kernel cache empty) with the reference cache that the first one
#             left: what compiling and tuning the reference once per machine saves
#   ray:      `grader batch --backend ray` (a Ray instance started for the batch, one GPU) on the
#             bundled examples with timing on, beside `--gpus 0` (the local subprocess runner)
#   stash:    keep the half of Ray's wheel this call carried (.ray-wheels/, scripts/ray-wheels.sh)
#             in /tmp for the next call to the same warm machine; the ray step joins the halves,
#             checks the joined wheel's sha256 and installs Ray and its dependencies from them
#   STEPS=refcache,ray benchmarks/cluster_gpu.sh
# Both batches give each problem BATCH_TIMEOUT seconds (default 120): the bundled `broken` example's
# matmul never returns and would otherwise hold its batch for the spec's limit (600 s). LOCAL_DIR
# names a local batch of the examples an earlier call to the same machine left (it is not graded again).
set -uo pipefail
cd "$(dirname "$0")/.."
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
