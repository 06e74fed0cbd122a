#!/bin/sh
# Every numeric MaxText key smoe train reads (the table `smoe train
# --list-keys` prints) through hostile values: 0, -1, huge, nan, inf. Each
# run must end in one of three ways: exit 2 with one line naming the key;
# a run that completes with finite losses; or, for settings that make the
# training diverge (a learning rate of 1e30), the stop at the first
# non-finite loss that abort_on_nan_loss / abort_on_inf_loss ask for (exit
# 1, naming the step and the value). Never a crash, an assertion, a hang or
# a non-finite number in the output.
# usage: train_keys.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

timeout 60 "$mpiexec" -n 1 "$smoe" train --list-keys >"$dir/keys" 2>&1 || {
  echo "FAIL: smoe train --list-keys"
  cat "$dir/keys"
  echo "0 passed, 1 failed"
  exit 1
}
nkeys=$(grep -vc '^#' "$dir/keys")
[ "$nkeys" -ge 20 ] || { echo "FAIL: only $nkeys keys listed"; echo "0 passed, 1 failed"; exit 1; }
grep -v '^#' "$dir/keys" | while read -r key type rule; do
  if [ "$type" = int ]; then huge=1000000000; else huge=1e30; fi
  for v in 0 -1 "$huge" nan inf; do
    timeout 120 "$mpiexec" -n 1 "$smoe" train --steps 2 --quiet --json "$key=$v" \
      override_model_config=true </dev/null >"$dir/out" 2>"$dir/err"
    rc=$?
    lines=$(grep -c '^smoe:' "$dir/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "$key" "$dir/err"; then
      echo "pass refused $key=$v: $(grep '^smoe:' "$dir/err" | cut -c1-140)"
    elif [ "$rc" -eq 0 ] && [ "$lines" -eq 0 ] && grep -q '"loss":' "$dir/out" &&
      ! grep -Eq '"loss":[[:space:]]*(null|nan|-?inf)' "$dir/out"; then
      echo "pass ran $key=$v: finite losses"
    elif [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] &&
      grep -Eq '^smoe: step [0-9]+: the loss is (nan|inf|-inf) \(abort_on_(nan|inf)_loss: true\)' "$dir/err"; then
      echo "pass diverged $key=$v: $(grep '^smoe:' "$dir/err" | cut -c1-100)"
    else
      echo "fail $key=$v -> exit $rc, $lines smoe line(s)"
      sed 's/^/    /' "$dir/err" | head -6
    fi
  done
done >"$dir/log"
cat "$dir/log"
pass=$(grep -c '^pass' "$dir/log")
fail=$(grep -c '^fail' "$dir/log")
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
