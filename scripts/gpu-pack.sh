#!/bin/sh
# Build here what the GPU machine runs and put it in .gpu/ (ignored by git;
# the device tool carries it): the GPU machine has CUDA and a compiler but
# not smoe's Debian libraries, so the binaries that use the device are
# built here against the CUDA toolkit and need there only libc, the
# toolkit's libcudart and libcublasLt, and OpenBLAS (test_kops_dev's CPU
# twins; bench/results/2026-12-04-gpu-machine-probe.md found it there), and
# for nccl_pair libnccl (PyTorch's wheel there: gpu-check.sh finds it);
# the trainer's libyaml and cJSON travel in .gpu/lib. Then, on the GPU machine: scripts/gpu-check.sh .gpu OUT_DIR.
# usage: scripts/gpu-pack.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DSMOE_CUDA=ON >/dev/null
cmake --build "$build" --target test_dev test_kops_dev test_model_dev test_train_dev \
  test_vrank_dev bench_vrank_link bench_train_dev nccl_pair smoe
mkdir -p .gpu
cp "$build/tests/test_dev" "$build/tests/test_kops_dev" "$build/tests/test_model_dev" \
  "$build/tests/test_train_dev" "$build/tests/test_vrank_dev" "$build/bench/bench_vrank_link" \
  "$build/bench/bench_train_dev" bench/vs_torch_gpu.py bench/torch_model.py \
  "$build/tests/nccl_pair" tests/nccl_pair.sh "$build/smoe" scripts/gpu-nccl-train.sh .gpu/
cp -r configs .gpu/ && cp data/gpl-3.0.txt .gpu/
# libyaml and cJSON, which the GPU machine lacks (the probe), for test_train_dev
mkdir -p .gpu/lib
for l in $(ldd "$build/tests/test_train_dev" | awk '/libcjson|libyaml/ { print $3 }'); do
  cp -L "$l" .gpu/lib/
done
cp scripts/gpu-check.sh .gpu/
echo "packed: $(ls .gpu | tr '\n' ' ')"
