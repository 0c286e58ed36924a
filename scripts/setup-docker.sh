#!/usr/bin/env bash
# Make this machine able to build and run the CPU grading image, for the container tests.
#
# Idempotent and fast when nothing is missing. Steps, each skipped when already done:
#   1. the Docker engine and debootstrap (Debian's docker.io; only as root with apt-get)
#   2. a running engine: dockerd started in the background when no engine answers
#   3. the local CPU base image (no image registry is reachable in CI): a minimal Debian bookworm
#      made with debootstrap and `docker import`ed as $CPU_BASE_IMAGE
#   4. the Python wheels the CPU image installs (`pip install --no-index`), downloaded here on the
#      host into docker/wheels/ (the build context): PyPI's torch (the CUDA build, which runs on CPU)
#      and its CUDA libraries, a few GB; $TORCH_CPU_WHEEL, when set, is offered to pip first
#
# Where a step cannot run (not root, no apt-get), it says so and exits 0: the container tests then
# skip with a reason instead of failing. Set SETUP_DOCKER_STRICT=1 to make that an error.
set -euo pipefail
cd "$(dirname "$0")/.."

CPU_BASE_IMAGE="${CPU_BASE_IMAGE:-triton-kernels-cpu-base:bookworm}"
TORCH_CPU_WHEEL="${TORCH_CPU_WHEEL:-}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${GRADER_DOCKER_CACHE:-/var/cache/triton-kernels-grader}"
WHEELS=docker/wheels
REQUIREMENTS=docker/requirements-cpu.txt
DOCKERD_LOG="${DOCKERD_LOG:-/var/log/triton-kernels-dockerd.log}"

say() { printf 'setup-docker: %s\n' "$*"; }
give_up() {
  say "$*"
  if [ "${SETUP_DOCKER_STRICT:-0}" = "1" ]; then exit 1; fi
  say "container tests will be skipped"
  exit 0
}
started=$(date +%s)

# 1. packages ------------------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    docker info >/dev/null 2>&1 || give_up "no Docker engine, and cannot install ${missing[*]} (needs root and apt-get)"
  else
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt_log=$(mktemp)
    { apt-get update -q && NEEDRESTART_SUSPEND=1 apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$apt_log" 2>&1 \
      || { tail -n 20 "$apt_log" >&2; give_up "apt-get could not install ${missing[*]}"; }
    rm -f "$apt_log"
  fi
fi

# 2. a running engine ----------------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" = 0 ] || give_up "no Docker engine answers, and only root can start dockerd here"
  say "starting dockerd (log: $DOCKERD_LOG)"
  # Grading containers use network mode none, and the CPU image builds from local wheels, so the
  # engine needs no bridge network and leaves the host's firewall alone.
  setsid nohup dockerd --bridge=none --iptables=false --ip6tables=false >"$DOCKERD_LOG" 2>&1 < /dev/null &
  for _ in $(seq 1 60); do
    if docker info >/dev/null 2>&1; then break; fi
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -n 20 "$DOCKERD_LOG" >&2 || true; give_up "dockerd did not answer within 60 s"; }
fi
say "engine $(docker version --format '{{.Server.Version}}' 2>/dev/null) is up"

# 3. the CPU base image --------------------------------------------------------------------------
if ! docker image inspect "$CPU_BASE_IMAGE" >/dev/null 2>&1; then
  command -v debootstrap >/dev/null 2>&1 || give_up "debootstrap is missing: cannot make $CPU_BASE_IMAGE"
  rootfs="$CACHE_DIR/rootfs-bookworm"
  if [ ! -f "$rootfs/.complete" ]; then
    say "debootstrapping a minimal bookworm into $rootfs (a few minutes)"
    rm -rf "$rootfs"
    mkdir -p "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv bookworm "$rootfs" "$DEBIAN_MIRROR" >"$CACHE_DIR/debootstrap.log" 2>&1 \
      || { tail -n 20 "$CACHE_DIR/debootstrap.log" >&2; give_up "debootstrap failed (log: $CACHE_DIR/debootstrap.log)"; }
    # what an image does not need: package caches, docs, man pages, translations
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
      "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    touch "$rootfs/.complete"
  fi
  say "importing $CPU_BASE_IMAGE"
  tar --exclude=./.complete -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["/bin/bash"]' \
    - "$CPU_BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"  # the image holds it now
fi
say "base image $CPU_BASE_IMAGE is present"

# 4. wheels for the CPU image --------------------------------------------------------------------
[ -z "$TORCH_CPU_WHEEL" ] || [ -f "$TORCH_CPU_WHEEL" ] || give_up "TORCH_CPU_WHEEL=$TORCH_CPU_WHEEL is missing"
stamp="$(cat "$REQUIREMENTS" | sha256sum | cut -c1-16)-$(basename "${TORCH_CPU_WHEEL:-pypi}")"
if [ "$(cat "$WHEELS/.complete" 2>/dev/null || true)" != "$stamp" ]; then
  # The wheels take 2.6 GB and the CPU image about 13 GB while it builds (its deps stage holds the
  # wheels and the installed environment, the final image the environment again): say so up front,
  # not as a pip traceback half-way through a download.
  need_gb="${SETUP_DOCKER_NEED_GB:-18}"
  docker_root=$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)
  for place in . "$docker_root"; do
    [ -d "$place" ] || continue
    free_gb=$(( $(df -Pk "$place" | awk 'NR==2 {print $4}') / 1048576 ))
    [ "$free_gb" -ge "$need_gb" ] || give_up "only $free_gb GB free on the file system of $place; the CPU image's wheels and build need about $need_gb GB (free some, or set SETUP_DOCKER_NEED_GB)"
  done
  say "downloading the wheels of $REQUIREMENTS into $WHEELS"
  find "$WHEELS" -name '*.whl' -delete 2>/dev/null || true
  mkdir -p "$WHEELS"
  if [ -n "$TORCH_CPU_WHEEL" ]; then cp "$TORCH_CPU_WHEEL" "$WHEELS/"; fi
  pip=pip3
  [ -x .venv/bin/pip ] && pip=.venv/bin/pip
  # The image runs Debian bookworm's CPython 3.11 on x86-64, whatever this host runs: ask for
  # exactly those wheels (pip matches each manylinux tag exactly, so name every glibc up to
  # bookworm's 2.36 that wheels use: the CUDA libraries are tagged 2_5 to 2_28).
  platforms=()
  for minor in $(seq 28 -1 5); do platforms+=(--platform "manylinux_2_${minor}_x86_64"); done
  # --no-cache-dir: the wheels land in $WHEELS; a second copy in pip's cache would only fill the disk
  "$pip" download -q --no-cache-dir --dest "$WHEELS" --find-links "$WHEELS" --only-binary=:all: \
    --python-version 3.11 --implementation cp --abi cp311 \
    "${platforms[@]}" --platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64 \
    --platform linux_x86_64 \
    -r "$REQUIREMENTS" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  echo "$stamp" >"$WHEELS/.complete"
fi
say "wheels ready in $WHEELS ($(du -sh "$WHEELS" | cut -f1)); done in $(( $(date +%s) - started )) s"
