#!/bin/sh
# Model FLOP/s inside compute against the same run's single-core sgemm
# (n = 512), for the tiny model of the main job and a 512-wide one
# (build/bench/bench_compute: one rank's training step, forward + backward,
# interleaved round by round with the sgemm, timed by the thread's CPU time
# and by wall time; medians and quartiles over the rounds). REPS
# repetitions of each, alternating the two models, with the load before and
# after each.
# usage: bench/compute.sh [BUILD_DIR] [REPS] [ROUNDS]   (defaults build 3 15)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
reps=${2:-3}
rounds=${3:-15}
export OPENBLAS_NUM_THREADS=1
echo "== machine: $(lscpu | sed -n 's/^CPU(s): *//p') CPUs, $(lscpu | sed -n 's/^Model name: *//p')"
r=1
while [ "$r" -le "$reps" ]; do
  echo "== repetition $r, load: $(uptime | sed 's/.*load/load/')"
  "$build/bench/bench_compute" tiny "$rounds"
  "$build/bench/bench_compute" wide "$rounds"
  r=$((r + 1))
done
echo "== load after: $(uptime | sed 's/.*load/load/')"
