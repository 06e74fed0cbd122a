#!/bin/sh
# Build here what the GPU machine runs and put it in .gpu/ (ignored by git;
# the device tool carries it): the GPU machine has CUDA and a compiler but
# not smoe's Debian libraries, so the binaries that use the device are
# built here against the CUDA toolkit and need only libc and libcudart
# there. Then, on the GPU machine: scripts/gpu-check.sh .gpu OUT_DIR.
# usage: scripts/gpu-pack.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DSMOE_CUDA=ON >/dev/null
cmake --build "$build" --target test_dev
mkdir -p .gpu
cp "$build/tests/test_dev" .gpu/
cp scripts/gpu-check.sh .gpu/
echo "packed: $(ls .gpu | tr '\n' ' ')"
