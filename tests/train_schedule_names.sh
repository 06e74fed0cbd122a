#!/bin/sh
# A schedule file whose weight names are not the model's one-to-one, end to
# end: `smoe sim --schedule-out` on the tiny model, its dense weight 4
# renamed to weight 7 (weight 4 would never be gathered), then `smoe train
# --schedule` on 2 ranks exits 2 with one line naming the file and both
# weights, before any step. (The names' rule itself is tested in process:
# test_schedule_match.)
# usage: train_schedule_names.sh MPIEXEC SMOE TEST_DATA
mpiexec=$1
smoe=$2
data=$3
. "$(dirname "$0")/runs_lib.sh"

"$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --remat none \
  --hardware "$data/hardware/cpu-mpi.yml" --prefetch-depth 1 --schedule-out "$dir/s.json" \
  >/dev/null 2>"$dir/sim.err"
check $? "smoe sim --schedule-out"
# the dense names (one line of the file), one a line
grep '"dense":' "$dir/s.json" | tr ',' '\n' | sed -n 's/.*"\(decoder[^"]*\)".*/\1/p' >"$dir/dense"
n4=$(sed -n 5p "$dir/dense")
n7=$(sed -n 8p "$dir/dense")
check "$([ -n "$n4" ] && [ -n "$n7" ] && echo 0 || echo 1)" "dense weights 4 and 7: '$n4', '$n7'"
sed "/\"dense\":/s|\"$n4\"|\"$n7\"|" "$dir/s.json" >"$dir/dup.json"
refused "$dir/dup.json: weights\.dense\[7\]: '$n7' is named twice \(also weights\.dense\[4\]\); '$n4' is missing" \
  2 --steps 3 --schedule "$dir/dup.json"
check "$([ "$rc" -eq 2 ] && echo 0 || echo 1)" "exit status 2 (got $rc)"
summary
