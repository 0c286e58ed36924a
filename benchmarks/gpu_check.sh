#!/usr/bin/env bash
# Everything that needs the GPU, in one run (the lent H200 is scarce): the handout tests and the
# grader on CUDA, the grader's timing noise and its agreement with do_bench, the kernel benchmarks.
# Logs and JSON go under $OUT. Choose steps with STEPS=handout,grade,noise,agreement,kernels,tests.
#   benchmarks/gpu_check.sh            (on a machine with a CUDA GPU and this repo's dependencies)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
STEPS=${STEPS:-handout,grade,noise,agreement,kernels,tests}
PROBLEMS=${PROBLEMS:-gelu,softmax,matmul,flash_attention}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
if [ -d .whl ]; then python3 -m pip install -q --no-index --no-deps --no-warn-script-location .whl/*.whl; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 -c "import torch, triton, pydantic; print('torch', torch.__version__, 'triton', triton.__version__, 'pydantic', pydantic.__version__)"
K=$(echo "$PROBLEMS" | sed 's/,/ or /g')
if has handout; then
  echo "== pytest handout --submission reference (CUDA)"
  python3 -m pytest handout --submission reference -q -p no:cacheprovider -k "$K" 2>&1 | tail -n 15
  echo "== pytest handout --submission reference --benchmark-only"
  python3 -m pytest handout --submission reference -q -p no:cacheprovider --benchmark-only -k "$K" \
      --benchmark-columns=median,iqr,rounds --benchmark-json="$OUT/handout-bench.json" 2>&1 | tail -n 40
fi
if has grade; then
  echo "== grader grade reference (CUDA, timing)"
  /usr/bin/time -f "wall %e s" python3 -m grader.cli grade reference --out "$OUT/ref1" --problems "$PROBLEMS" 2>&1 | tail -n 20
fi
if has noise; then
  echo "== grader grade reference, second run (noise)"
  python3 -m grader.cli grade reference --out "$OUT/ref2" --problems "$PROBLEMS" 2>&1 | tail -n 12
  python3 benchmarks/noise_report.py "$OUT/ref1/result.json" "$OUT/ref2/result.json" | tee "$OUT/noise.md"
fi
if has agreement; then
  echo "== timing agreement with do_bench"
  python3 benchmarks/timing_agreement.py --problems "$PROBLEMS" 2>&1 | tail -n 20
fi
if has kernels; then
  for b in benchmarks/bench_softmax_matmul.py benchmarks/bench_attention.py; do
    [ -f "$b" ] && { echo "== $b"; python3 "$b" 2>&1 | tail -n 40; }
  done
fi
if has tests; then
  echo "== GPU tests of the framework"
  python3 -m pytest tests -q -p no:cacheprovider -m gpu 2>&1 | tail -n 15
fi
