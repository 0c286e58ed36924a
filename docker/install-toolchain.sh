#!/bin/sh
# Build step of docker/Dockerfile (final stage). On a GPU, Triton compiles a small C launcher for
# each kernel signature the first time it runs, so the image needs a C compiler; the CUDA PyTorch
# *runtime* images ship none. The CPU variant runs Triton's interpreter, which needs no compiler,
# and is built without network: nothing to do there.
set -eu
variant="$1"
if [ "$variant" != gpu ]; then
    exit 0
fi
if command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; then
    echo "install-toolchain: a C compiler is already there"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-toolchain: no C compiler and no apt-get in the base image: Triton cannot build its launcher" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
packages="gcc libc6-dev"
# Triton's launcher includes Python.h: a distribution Python needs its headers (a conda one has them)
python=$(command -v python3 || command -v python)
if ! "$python" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
    packages="$packages python3-dev"
fi
apt-get install -y -q --no-install-recommends $packages
rm -rf /var/lib/apt/lists/*
