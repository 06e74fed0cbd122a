#!/bin/sh
# The CLI's wiring of the numeric MaxText keys (every key's hostile values
# are test_train_keys, in process): `smoe train --list-keys` prints the
# table, and one case of each outcome through mpirun on one rank: refused
# (exit 2, one line naming the key), a run with finite losses, and a
# diverging run stopped at the first non-finite loss (exit 1, naming the
# step and abort_on_nan_loss).
# usage: train_keys.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; sed 's/^/    /' "$dir/err" | head -6; }

timeout 60 "$mpiexec" -n 1 "$smoe" train --list-keys </dev/null >"$dir/keys" 2>"$dir/err"
nkeys=$(grep -vc '^#' "$dir/keys")
if [ "$nkeys" -ge 20 ] && grep -Eq '^learning_rate +float ' "$dir/keys" &&
  grep -Eq '^num_experts +int ' "$dir/keys"; then ok; else bad "--list-keys: $nkeys keys"; fi

# KEY=VALUE: run it, then judge by the exit status
run() {
  timeout 120 "$mpiexec" -n 1 "$smoe" train --steps 2 --quiet --json "$1" \
    override_model_config=true </dev/null >"$dir/out" 2>"$dir/err"
  rc=$?
  lines=$(grep -c '^smoe:' "$dir/err")
}
run num_experts=0
if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] &&
  grep -q "^smoe: argument 'num_experts=0': 'num_experts' must be an integer satisfying gt=0" \
    "$dir/err"; then ok; else bad "num_experts=0 -> exit $rc"; fi
run routed_scaling_factor=0
if [ "$rc" -eq 0 ] && [ "$lines" -eq 0 ] && grep -q '"loss":' "$dir/out" &&
  ! grep -Eq '"loss":[[:space:]]*(null|nan|-?inf)' "$dir/out"; then ok; else
  bad "routed_scaling_factor=0 -> exit $rc"; fi
run learning_rate=1e30
if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] &&
  grep -Eq '^smoe: step 2: the loss is nan \(abort_on_nan_loss: true\)' "$dir/err"; then ok; else
  bad "learning_rate=1e30 -> exit $rc"; fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
