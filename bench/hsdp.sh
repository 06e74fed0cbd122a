#!/bin/sh
# HSDP and two-level gathers against flat FSDP across a shaped link,
# measured and predicted.
# Two network-namespace hosts x 2 ranks joined by a link shaped to RATE
# (tbf, scripts/netns.sh); smoe sim --calibrate across them (its default
# mesh: hosts x ranks of a host, with the progress thread as smoe train
# runs across hosts); then, for
#   flat: fsdp=4, every weight gather crossing the link, and
#   hsdp: --slices 2 dcn_data_parallelism=2, fsdp=2 within each host, the
#         weights replicated across: only the gradients' all-reduce crosses,
#   two:  --slices 2 dcn_fsdp_parallelism=2, fsdp=4 as 2 hosts x 2, each
#         gather across the hosts (a rank's own shard) then within,
# smoe sim's prediction beside smoe train --compare's measurement
# (no-prefetch and prefetch taking turns step by step; bench/cmp_sim_train:
# step time and exposed wait, its 25 % check) and the bytes a rank sent per
# step within its host and across hosts (the JSON's host_bytes,
# link_bytes, prefetch's median step) with the plan's count across slices
# (smoe plan --slices). After each layout's run the profile is measured
# again (docs/sim.md, "Checked against reality"): where the machine's rates
# moved more than 15 % during it (bench/profile_drift.sh), that comparison
# is void, counted apart; the next layout is predicted on the new profile.
# The last lines count the comparisons with a figure outside
# cmp_sim_train's 25 % and the void ones; the script fails only when a run
# or a tool does.
# Needs root (network namespaces), Open MPI.
# usage: bench/hsdp.sh [BUILD_DIR] [STEPS] [RATE...]   (default: 12 steps; 2gbit 250mbit)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
steps=${2:-12}
shift $(($# < 2 ? $# : 2))
rates=${*:-2gbit 250mbit}
. "$top/bench/table_lib.sh"
. "$top/bench/hsdp_lib.sh"
# the median over prefetch's steps after the first round of a per-step key
bytes() { # FILE KEY
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
steps = [s for s in d["runs"]["prefetch"]["steps"]][1:]
print(int(statistics.median(s[sys.argv[2]] for s in steps)))
PY
}
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown), $steps steps a run"
outside=0 void=0
for rate in $rates; do
  "$top/scripts/netns.sh" down 2>/dev/null || true
  "$top/scripts/netns.sh" up 2 "$rate"
  echo
  echo "==== link $rate"
  calibrate "$dir/hw.yml"
  indented grep -E '^(dcn_|ici_bandwidth|peak_flops|progress|gather_core)' "$dir/hw.yml"
  for layout in flat hsdp two; do
    eval "mesh=\$$layout"
    predict "$mesh" "$dir/hw.yml" --json >"$dir/$layout-sim.json"
    # shellcheck disable=SC2086
    net train --steps "$steps" --compare --quiet --json $mesh $shape >"$dir/$layout.json"
    echo "-- $layout ($mesh): $(sed -n 's/.*"slices":[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/$layout.json")"
    echo "   bytes a rank sent per step: within its host $(bytes "$dir/$layout.json" host_bytes)," \
      "across hosts $(bytes "$dir/$layout.json" link_bytes)"
    [ "$layout" = flat ] || echo "   the plan's count across slices:" \
      "$("$build/smoe" plan --base "$build/configs/train.yml" --model tiny --devices 4 $mesh \
        $shape | sed -n 's/.*co-axis: bytes a device sends across slices per step of smoe train: \([0-9]*\).*/\1/p')"
    # a figure outside 25 % is a result, not a failure of the script:
    # counted, or counted void where the machine moved under the run
    calibrate "$dir/after.yml"
    drifted=0
    "$top/bench/profile_drift.sh" "$dir/hw.yml" "$dir/after.yml" >"$dir/drift.txt" || drifted=1
    if ! "$build/bench/cmp_sim_train" "$dir/$layout-sim.json" "$dir/$layout.json" >"$dir/cmp.txt"; then
      if [ "$drifted" = 1 ]; then void=$((void + 1)); else outside=$((outside + 1)); fi
    fi
    sed 's/^/   /' "$dir/cmp.txt" "$dir/drift.txt"
    mv "$dir/after.yml" "$dir/hw.yml"
  done
done
echo
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== comparisons with a figure outside 25 %: $outside; void (the machine moved): $void"
