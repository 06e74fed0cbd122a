#!/bin/sh
# Compressed gathers across hosts: 2 network-namespace "hosts" x 2 ranks
# joined by a link shaped to RATE with tbf (as bench/overlap.sh), the mesh
# fsdp=2 (across the hosts) x expert=2 (within). For each gather dtype (fp32,
# bf16, int8 in blocks of 8) one `smoe train --compare` run (no prefetch,
# prefetch and legacy interleaved step by step, so the machine's load hits
# them alike); wire_table prints the no-prefetch exposed wait and gathered
# bytes per step side by side with the prefetch wait and the share of the
# wait prefetch hides. Needs root (network namespaces) and Open MPI.
# The dtypes take turns over ROUNDS rounds (default 2; environment), a
# table per round, so a change of the machine's load shows as a difference
# between rounds rather than between dtypes.
# usage: [ROUNDS=N] bench/wire_overlap.sh [BUILD_DIR] [STEPS] [RATE] [KEY=VALUE ...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
steps=${2:-10}
rate=${3:-2gbit}
shift $(($# < 3 ? $# : 3))
model="ici_expert_parallelism=2 per_device_batch_size=8 $*"
. "$top/scripts/mpi-env.sh"
export SMOE_CONFIG_DIR="$build/configs"
dir=$(mktemp -d)
cleanup() { "$top/scripts/netns.sh" down; rm -rf "$dir"; }
trap cleanup EXIT
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
"$top/scripts/netns.sh" up 2 "$rate"
echo "== 2 hosts x 2 ranks, link $rate (tbf), fsdp=2 (across hosts) x expert=2, $steps steps each"
for r in $(seq 1 "${ROUNDS:-2}"); do
  for w in fp32 bf16 "int8 --int8-block 8"; do
    t=$(echo "$w" | cut -d' ' -f1)
    # shellcheck disable=SC2086
    "$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
      -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --steps "$steps" --compare \
      --quiet --json --gather-dtype $w $model >"$dir/$t.json"
  done
  echo "== round $r (load now: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$build/bench/wire_table" fp32="$dir/fp32.json" bf16="$dir/bf16.json" int8/8="$dir/int8.json"
done
