#!/bin/sh
# smoe sim checked against reality: calibrate this machine's cpu-mpi
# profile under the main job's layout, predict the default smoe train run
# (tiny model, 4 ranks on a 2x2 fsdp x expert mesh, prefetch off and on),
# measure it with smoe train --compare, and print predicted vs measured
# (medians over the steps after the first round, with quartiles). The
# profile is measured again after the run: when the machine's rates moved
# more than 15% (bench/profile_drift.sh: others' load), the comparison is
# void and the script exits 3.
# usage: bench/sim_vs_train.sh [BUILD_DIR] [STEPS] [NP] [KEY=VALUE ...]
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
default_n=20
. "$top/bench/ranks_args.sh"
steps=$count
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "== calibrate ($np ranks)"
mpirun $bind -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" sim --calibrate \
  --out "$dir/cpu-mpi.yml" $over
sed 's/^/   /' "$dir/cpu-mpi.yml"
echo "== predict"
"$build/smoe" sim --base "$build/configs/train.yml" --model tiny --devices "$np" $over \
  --hardware "$dir/cpu-mpi.yml" --batch 4 --seq 128 --remat none --dtype-bytes 4 \
  --prefetch-depth 1 --json >"$dir/sim.json"
"$build/smoe" sim --base "$build/configs/train.yml" --model tiny --devices "$np" $over \
  --hardware "$dir/cpu-mpi.yml" --batch 4 --seq 128 --remat none --dtype-bytes 4 \
  --prefetch-depth 1 >"$dir/sim.txt"
sed -n '4,8p' "$dir/sim.txt"
echo "== measure ($steps steps each)"
mpirun $bind -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" train --steps "$steps" \
  --compare --quiet --json $over >"$dir/train.json"
echo "== calibrate again: did the machine stay the same?"
mpirun $bind -np "$np" -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" sim --calibrate \
  --out "$dir/after.yml" $over
drift=0
"$top/bench/profile_drift.sh" "$dir/cpu-mpi.yml" "$dir/after.yml" || drift=1
echo "== predicted vs measured"
"$build/bench/cmp_sim_train" "$dir/sim.json" "$dir/train.json" || { [ "$drift" = 0 ] && exit 1; }
[ "$drift" = 0 ] || exit 3
