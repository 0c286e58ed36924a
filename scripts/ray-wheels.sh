#!/usr/bin/env bash
# Ray's wheels for the lent GPU machine, which has no network and takes at most 64 MiB per call:
# Ray's wheel alone is about 79 MB, so it goes in two halves, one per call to the same warm
# machine (BLOCK=cluster benchmarks/gpu_block.sh keeps the first half in /tmp and joins the two there):
#   scripts/ray-wheels.sh                         # writes .ray-wheels/1 and .ray-wheels/2
#   call 1: carry [".ray-wheels/1"], BLOCK=cluster STEPS=stash benchmarks/gpu_block.sh
#   call 2: carry [".ray-wheels/2", ".whl", ".out"], BLOCK=cluster STEPS=ray benchmarks/gpu_block.sh
# The versions are this checkout's (Ray as the tests use it), for the machine's Python 3.12.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
ray_version=$("$PY" -c "from importlib.metadata import version; print(version('ray'))")
submitit_version=$("$PY" -c "from importlib.metadata import version; print(version('submitit'))")
rm -rf .ray-wheels
download=$(mktemp -d)
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$download" "ray==$ray_version" "submitit==$submitit_version"
mkdir -p .ray-wheels/1 .ray-wheels/2
wheel=$(cd "$download" && ls ray-*.whl)
sha=$(sha256sum "$download/$wheel" | cut -d' ' -f1)
split -n 2 -d "$download/$wheel" ".ray-wheels/1/$wheel.part-"
mv ".ray-wheels/1/$wheel.part-01" .ray-wheels/2/
mv "$download"/*.whl .ray-wheels/1/ 2>/dev/null || true  # the dependencies: small, with the first half
rm -f ".ray-wheels/1/$wheel"
for half in 1 2; do printf '%s\t%s\t2\n' "$wheel" "$sha" > ".ray-wheels/$half/manifest"; done
rm -rf "$download"
du -sh .ray-wheels/1 .ray-wheels/2
