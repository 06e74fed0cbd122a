#!/bin/sh
# Does `smoe sim --calibrate` repeat? N back-to-back calibrations of this
# machine's cpu-mpi profile under NP ranks on one host (the layout of
# bench/budget_sim_train.sh), then for each the drift from the first
# (bench/profile_drift.sh, its 15 % limit) and the load, and per figure the
# values of all N and their largest ratio (max / min - 1), with each
# calibration's share of a core (its "share" comment: 4 ranks alone on 2
# cores have 0.50; a lower share is others' load).
# usage: bench/calib_repeat.sh [BUILD_DIR] [N] [NP] [KEY=VALUE ...]
#   exit 1 when any calibration drifted more than 15 % from the first
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
default_n=5
. "$top/bench/ranks_args.sh"
n=$count
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "== machine: $(nproc) cores; 1 host, $np ranks; $n calibrations back to back"
i=1
while [ "$i" -le "$n" ]; do
  echo "== calibration $i, load: $(uptime | sed 's/.*load average: //')"
  mpirun $bind -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" sim --calibrate \
    --out "$dir/p$i.yml" $over >/dev/null
  i=$((i + 1))
done
echo "== load after: $(uptime | sed 's/.*load average: //')"
status=0
i=2
while [ "$i" -le "$n" ]; do
  printf "1 -> %d: " "$i"
  "$top/bench/profile_drift.sh" "$dir/p1.yml" "$dir/p$i.yml" || status=1
  i=$((i + 1))
done
# layer_time (a comment): the layers' measured time, which the simulator
# uses (compute_scale is it over the roofline of the same profile's rates)
for k in peak_flops gemm_small_flops hbm_bandwidth ici_bandwidth compute_scale layer_time \
         optimizer_rate a2a_bandwidth op_overhead sync_skew core_share; do
  for f in "$dir"/p*.yml; do sed -n "s/^\(# \)*$k:* *\([^ ]*\).*/\2/p" "$f"; done |
    awk -v k="$k" '{ v[NR] = $1 + 0 }
      END { lo = v[1]; hi = v[1]; s = ""
            for (i = 1; i <= NR; i++) { s = s sprintf(" %10.4g", v[i]); if (v[i] < lo) lo = v[i]; if (v[i] > hi) hi = v[i] }
            r = "-"; if (lo > 0) r = sprintf("%.0f%%", 100 * (hi / lo - 1))
            printf "%-18s%s   max/min - 1: %s\n", k, s, r }'
done
printf "%-18s" share
for f in "$dir"/p*.yml; do
  printf " %10s" "$(sed -n 's/.*share \([0-9.]*\): the part of a core.*/\1/p' "$f")"
done
echo
exit $status
