#!/bin/sh
# smoe sim's memory-budgeted planner checked against smoe train executing
# the same schedules. Calibrates this machine's cpu-mpi profile under the
# run's own layout, finds the no-prefetch and the depth-2 peaks as smoe sim
# counts memory, takes five budgets from the first to the second, and for
# each has smoe sim plan whole-weight schedules (--schedule-out) and predict
# step time, exposed gather wait and peak; smoe train then runs the five
# files in one training (repeated --schedule: they take turns step by
# step, the order rotating every round, so a load change on this shared
# machine falls on all of them), and bench/cmp_budget prints predicted vs
# measured (medians over the steps after the first round, with quartiles).
#   NET=1 runs on two network-namespace hosts x NP/2 ranks joined by a link
#   shaped to RATE (scripts/netns.sh, needs root): fsdp crosses the link.
# usage: bench/budget_sim_train.sh [BUILD_DIR] [ROUNDS] [NP] [KEY=VALUE ...]
#   env: NET=1, RATE (default 2gbit), REPEAT (default 1: whole runs, each
#   with its own calibration), PROGRESS (calls or thread: how MPI progresses
#   in the calibrations and the training alike, the profile's `progress`;
#   default thread with NET=1, where the simulator refuses calls, else
#   calls; both commands are told either way), TRAIN_ARGS (more smoe train flags). The profile is measured again after each run:
#   when the machine's rates moved more than 15% (bench/profile_drift.sh:
#   others' load), that run's comparison is void (exit 3 unless another
#   run failed outright).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
default_n=8
. "$top/bench/ranks_args.sh"
. "$top/bench/table_lib.sh"
rounds=$count
net=${NET:-0}
rate=${RATE:-2gbit}
repeat=${REPEAT:-1}
progress=${PROGRESS:-$([ "$net" = 1 ] && echo thread || echo calls)}
case "$progress" in
  thread) pth=--progress-thread ;;
  calls) pth=--no-progress-thread ;;
  *) echo "PROGRESS=$progress: expected calls or thread" >&2; exit 2 ;;
esac
dir=$(mktemp -d)
if [ "$net" = 1 ]; then
  export SMOE_NETNS="sb$$"
  trap '"$top/scripts/netns.sh" down; rm -rf "$dir"' EXIT
  "$top/scripts/netns.sh" up 2 "$rate"
  half=$((np / 2))
  launch() {
    "$top/scripts/netns.sh" mpirun $bind --host "10.99.0.1:$half,10.99.0.2:$half" \
      -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$@"
  }
  where="2 netns hosts x $half ranks, link $rate (tbf)"
else
  trap 'rm -rf "$dir"' EXIT
  launch() { mpirun $bind -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$@"; }
  where="1 host, $np ranks"
fi
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $where"
echo "== progress: $progress (calibrations and training)"
echo "== load before: $(uptime)"
sim() {
  "$build/smoe" sim --base "$build/configs/train.yml" --model tiny --devices "$np" $over \
    --hardware "$dir/cpu-mpi.yml" --batch 4 --seq 128 --remat none --dtype-bytes 4 "$@"
}
peak() { # the peak of schedule $1 in a sim --json on stdin
  sed -n '/"'"$1"'":/,/peak_hbm_bytes/p' | sed -n 's/.*"peak_hbm_bytes":[[:space:]]*\([0-9.e+]*\).*/\1/p' | head -1
}
status=0
r=1
while [ "$r" -le "$repeat" ]; do
  echo "== run $r: calibrate ($np ranks)"
  launch "$build/smoe" sim --calibrate $pth --out "$dir/cpu-mpi.yml" $over
  indented grep -E '^(progress|peak_flops|ici_bandwidth|ici_latency|dcn_bandwidth|dcn_latency|devices_per_node|a2a_bandwidth|compute_scale|sync_skew|reduce_lag_bandwidth|optimizer_rate):' \
    "$dir/cpu-mpi.yml"
  p0=$(sim --prefetch-depth 0 --json | peak baseline)
  p2=$(sim --prefetch-depth 2 --json | peak prefetch)
  if [ -z "$p0" ] || [ -z "$p2" ]; then # the simulator refused (its line above)
    echo "== no prediction: the simulator refused this profile" >&2
    exit 2
  fi
  echo "== predicted peaks: no prefetch $p0 B, depth 2 $p2 B"
  args=""
  for k in 0 1 2 3 4; do
    b=$(awk -v a="$p0" -v c="$p2" -v k="$k" 'BEGIN { printf "%.0f", a + (c - a) * k / 4 }')
    sim --hbm-budget "$b" --whole-weights --schedule-out "$dir/b$k.json" --json >"$dir/sim$k.json"
    args="$args --schedule $dir/b$k.json"
  done
  steps=$((5 * rounds))
  echo "== measure: the 5 schedules taking turns, $steps steps ($rounds rounds)"
  launch "$build/smoe" train $pth ${TRAIN_ARGS:-} --steps "$steps" --quiet --json $over $args >"$dir/train.json"
  echo "== load after: $(uptime)"
  launch "$build/smoe" sim --calibrate $pth --out "$dir/after.yml" $over
  drift=0
  "$top/bench/profile_drift.sh" "$dir/cpu-mpi.yml" "$dir/after.yml" || drift=1
  echo "== predicted vs measured (run $r)"
  cmpargs=""
  for k in 0 1 2 3 4; do cmpargs="$cmpargs $dir/b$k.json $dir/sim$k.json"; done
  if "$build/bench/cmp_budget" "$dir/train.json" $cmpargs; then
    [ "$drift" = 0 ] || status=3
  else
    [ "$drift" = 0 ] && status=1 || status=3
  fi
  r=$((r + 1))
done
exit $status
