#!/bin/sh
# smoe sim's cost in the device count: DeepSeek-V3 (61 layers, EP 8, every
# schedule of a TPU7x profile, whole process) from 2^10 to 2^30 devices,
# ROUNDS rounds interleaved over the sizes (bench_cmd: min / median / max
# of RUNS runs per size and round). The collective model counts a group's
# members on a node in closed form, so the time must not grow with N.
# usage: bench/sim_scale.sh BUILD_DIR [ROUNDS] [RUNS]
set -eu
build=${1:-build}
rounds=${2:-3}
runs=${3:-5}
export SMOE_CONFIG_DIR="$build/configs"
for r in $(seq "$rounds"); do
  for p in 10 16 20 24 30; do
    n=$((1 << p))
    printf "round %d  2^%-2d devices  " "$r" "$p"
    "$build/bench/bench_cmd" "$runs" "$build/smoe" sim --model deepseek3-671b --devices "$n" \
      ici_expert_parallelism=8 --hardware tpu7x --batch 1 --seq 4096
  done
done
