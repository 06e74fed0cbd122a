#!/bin/sh
# Build smoe and run the main job on the bundled default.
# usage: scripts/run.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build"
"$build/smoe" plan --model deepseek3-671b --devices 128 ici_expert_parallelism=8 --compare
