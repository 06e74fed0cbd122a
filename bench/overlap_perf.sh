#!/bin/sh
# Where the ranks' CPU time goes across the shaped link: one smoe train run
# of one schedule (prefetch depth DEPTH, 0 = no prefetch) on 2 network-
# namespace hosts x 2 ranks, as bench/overlap.sh runs it, with perf
# sampling the four ranks (every thread) for SECONDS once they run;
# bench/perf_classes.py then sorts the samples by what they were doing:
# sgemm, smoe's kernels, poll() (Open MPI's event loop over the sockets),
# the TCP send path (writev: TCP, veth, tbf and, through veth, the peer's
# receive softirq run in the sender's system call), the TCP receive, the within-host single copy (process_vm_readv),
# sleeps, futexes, other interrupts; training threads apart from the others
# (progress thread, MPI's). Needs root, perf, Open MPI and python3.
# usage: bench/overlap_perf.sh [BUILD_DIR] [DEPTH] [RATE] [SECONDS]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
depth=${2:-1}
rate=${3:-2gbit}
secs=${4:-6}
P=${SMOE_NETNS:-smoe}
. "$top/scripts/mpi-env.sh"
. "$top/bench/table_lib.sh"
export SMOE_CONFIG_DIR="$build/configs"
command -v perf >/dev/null 2>&1 || { echo "bench/overlap_perf.sh: perf not installed" >&2; exit 1; }
echo "== machine: $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
dir=$(mktemp -d)
cleanup() { "$top/scripts/netns.sh" down; rm -rf "$dir"; }
trap cleanup EXIT
"$top/scripts/netns.sh" up 2 "$rate"
# enough steps to outlast the sampling
"$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
  -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --quiet --steps 400 \
  --prefetch-depth "$depth" ici_expert_parallelism=2 per_device_batch_size=8 >/dev/null 2>&1 &
job=$!
ranks() { for h in 1 2; do ip netns pids "$P-h$h"; done | while read -r p; do
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = smoe ] && echo "$p"; done | paste -sd, -; }
n=0
pids=$(ranks)
while [ "$(echo "$pids" | tr , '\n' | grep -c .)" -lt 4 ] && [ $n -lt 120 ]; do
  sleep 0.5; n=$((n + 1)); pids=$(ranks)
done
sleep 3 # past the set-up and the first steps
echo "== depth $depth, link $rate: perf over ${secs} s of ranks $pids"
perf record -q -g -p "$pids" -o "$dir/perf.data" sleep "$secs" >/dev/null 2>&1
kill "$job" 2>/dev/null || true
wait "$job" 2>/dev/null || true
echo "   load after: $(cut -d' ' -f1-3 /proc/loadavg)"
perf script -i "$dir/perf.data" -F comm,tid,ip,sym,dso >"$dir/perf.txt" 2>/dev/null
indented python3 "$top/bench/perf_classes.py" <"$dir/perf.txt"
