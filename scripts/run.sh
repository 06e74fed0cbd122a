#!/bin/sh
# Build smoe and run the main job on the bundled default: `smoe train` of the
# small DeepSeek-style model ('tiny') on the bundled text, 4 MPI ranks on a
# 2x2 (fsdp, expert) mesh, no-prefetch / prefetch / legacy taking turns step by
# step in one training run (--compare), each reported as median and quartiles.
# usage: scripts/run.sh [BUILD_DIR] [STEPS]
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
build=${1:-build}
steps=${2:-30}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"
# mpirun with Open MPI's settings for root and more ranks than cores
scripts/mpirun.sh -np 4 "$build/smoe" train --steps "$steps" --compare \
  ici_expert_parallelism=2
