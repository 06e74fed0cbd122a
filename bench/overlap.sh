#!/bin/sh
# Overlap benchmark of smoe train: no-prefetch, prefetch and legacy taking
# turns step by step in one run (smoe train --compare, so the machine's load
# falls on the three alike), on
#   (a) 2 network-namespace "hosts" x 2 ranks, the hosts joined by a link
#       shaped to RATE with tbf: gathers over fsdp cross the link, so they
#       are limited by something other than the ranks' own cores and can
#       hide behind compute;
#   (b) one host, 4 ranks over shared memory, where a gather is a memcpy on
#       the cores that compute, so nothing can hide it (reported honestly).
# bench/overlap_table.py prints each run's medians and quartiles and the
# goals: the share of no-prefetch's exposed wait that prefetch hides, and
# prefetch's step over max(C, L), C a step with free transfers
# (no-prefetch's step less its waits), L the link's time per step: the
# busiest host's bytes sent per step (its interface's counter over a
# separate prefetch run of 2 and of 2 + STEPS/3 steps) over RATE.
# Then the CPU floor: the ranks' CPU time per step (all threads, user and
# kernel, from the JSON's cpu_ms) over the cores, for prefetch and
# no-prefetch, prefetch's step over it and C over no-prefetch's (where the
# 4 ranks share 2 cores no step is shorter than its own floor; C below
# no-prefetch's floor is work no-prefetch does inside its waits). Also
# prints the BLAS kernel, the single-core sgemm rate and the load.
# bench/overlap_perf.sh profiles where that CPU time goes.
# Needs root (network namespaces), Open MPI and python3.
# usage: bench/overlap.sh [BUILD_DIR] [STEPS] [RATE] [KEY=VALUE|--train-flag ...]
# (e.g. --no-progress-thread: smoe train runs its progress thread across
# hosts by default, which the results in bench/results/ use)
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
. "$top/bench/table_lib.sh"
export SMOE_CONFIG_DIR="$build/configs"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== BLAS"
indented "$build/bench/bench_gemm"
dir=$(mktemp -d)
cleanup() { "$top/scripts/netns.sh" down; rm -rf "$dir"; }
trap cleanup EXIT
"$top/scripts/netns.sh" up 2 "$rate"
net() { # ARGS: smoe train across the two hosts
  "$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
    -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --quiet "$@"
}
sent() { # the busiest host's bytes sent so far
  for k in 1 2; do
    ip netns exec "${SMOE_NETNS:-smoe}-h$k" cat /sys/class/net/eth0/statistics/tx_bytes
  done | sort -n | tail -1
}
echo "== (a) 2 hosts x 2 ranks, link $rate (tbf), mesh fsdp=2 (across hosts) x expert=2 (within)"
# shellcheck disable=SC2086
net --steps "$steps" --compare --json $model >"$dir/a.json"
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
extra=$((steps / 3 > 2 ? steps / 3 : 2))
b0=$(sent)
# shellcheck disable=SC2086
net --steps 2 --json $model >/dev/null
b1=$(sent)
# shellcheck disable=SC2086
net --steps $((2 + extra)) --json $model >/dev/null
b2=$(sent)
per=$(( (b2 - b1 - (b1 - b0)) / extra ))
bits=$(echo "$rate" | awk '{ r = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u);
  m = u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : u == "bit" ? 1 : 0;
  if (!m) { print "bench/overlap.sh: unknown rate unit in " $1 > "/dev/stderr"; exit 1 }
  printf "%.0f", r * m }')
echo "   link: the busiest host sends $per bytes per prefetch step"
indented python3 "$top/bench/overlap_table.py" "$dir/a.json" "$per" "$bits"
echo
echo "== (b) 1 host, 4 ranks over shared memory, same mesh"
# shellcheck disable=SC2086
mpirun -np 4 -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --steps "$steps" \
  --compare --quiet --json $model >"$dir/b.json"
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
indented python3 "$top/bench/overlap_table.py" "$dir/b.json"
