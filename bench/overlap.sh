#!/bin/sh
# Overlap benchmark of smoe train: no-prefetch, prefetch and legacy in one
# run each (smoe train --compare, same initial state), on
#   (a) 2 network-namespace "hosts" x 2 ranks, the hosts joined by a link
#       shaped to RATE with tbf: gathers over fsdp cross the link, so they
#       are limited by something other than the ranks' own cores and can
#       hide behind compute;
#   (b) one host, 4 ranks over shared memory, where a gather is a memcpy on
#       the cores that compute, so nothing can hide it (reported honestly).
# Also prints the BLAS kernel and the single-core sgemm rate.
# Needs root (network namespaces) and Open MPI.
# usage: bench/overlap.sh [BUILD_DIR] [STEPS] [RATE] [KEY=VALUE ...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
steps=${2:-10}
rate=${3:-2gbit}
shift $(($# < 3 ? $# : 3))
# the bundled model with 8 sequences of 128 bytes per rank: compute per
# layer exceeds the time its gathers need on the shaped link
model="ici_expert_parallelism=2 per_device_batch_size=8 $*"
. "$top/scripts/mpi-env.sh"
export SMOE_CONFIG_DIR="$build/configs"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== BLAS"
"$build/bench/bench_gemm" | sed 's/^/   /'
cleanup() { "$top/scripts/netns.sh" down; }
trap cleanup EXIT
"$top/scripts/netns.sh" up 2 "$rate"
echo "== (a) 2 hosts x 2 ranks, link $rate (tbf), mesh fsdp=2 (across hosts) x expert=2 (within)"
"$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
  -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --steps "$steps" --compare \
  --quiet $model
echo
echo "== (b) 1 host, 4 ranks over shared memory, same mesh"
mpirun -np 4 -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --steps "$steps" \
  --compare --quiet $model
