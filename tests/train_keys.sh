#!/bin/sh
# Every numeric MaxText key smoe train reads (the table `smoe train
# --list-keys` prints) through hostile values: 0, -1, huge, nan, inf. Each
# run must end in one of three ways: exit 2 with one line naming the key;
# a run that completes with finite losses; or, for settings that make the
# training diverge (a learning rate of 1e30), the stop at the first
# non-finite loss that abort_on_nan_loss / abort_on_inf_loss ask for (exit
# 1, naming the step and the value). Never a crash, an assertion, a hang or
# a non-finite number in the output. Two single-rank runs at a time.
# usage: train_keys.sh MPIEXEC SMOE
#        train_keys.sh --one MPIEXEC SMOE DIR KEY VALUE   (one case; internal)
if [ "$1" = --one ]; then
  mpiexec=$2 smoe=$3 dir=$4 key=$5 v=$6
  out=$dir/$key=$v.out err=$dir/$key=$v.err
  # each launch its own TMPDIR: two launchers starting at once must not race
  # for the same session directory
  mkdir -p "$dir/tmp-$key=$v"
  TMPDIR=$dir/tmp-$key=$v timeout 120 "$mpiexec" -n 1 "$smoe" train --steps 2 --quiet --json \
    "$key=$v" override_model_config=true </dev/null >"$out" 2>"$err"
  rc=$?
  lines=$(grep -c '^smoe:' "$err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "$key" "$err"; then
    echo "pass refused $key=$v: $(grep '^smoe:' "$err" | cut -c1-140)"
  elif [ "$rc" -eq 0 ] && [ "$lines" -eq 0 ] && grep -q '"loss":' "$out" &&
    ! grep -Eq '"loss":[[:space:]]*(null|nan|-?inf)' "$out"; then
    echo "pass ran $key=$v: finite losses"
  elif [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] &&
    grep -Eq '^smoe: step [0-9]+: the loss is (nan|inf|-inf) \(abort_on_(nan|inf)_loss: true\)' "$err"; then
    echo "pass diverged $key=$v: $(grep '^smoe:' "$err" | cut -c1-100)"
  else
    echo "fail $key=$v -> exit $rc, $lines smoe line(s)"
    sed 's/^/    /' "$err" | head -6
  fi
  exit 0
fi
mpiexec=$1
smoe=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
timeout 60 "$mpiexec" -n 1 "$smoe" train --list-keys </dev/null >"$dir/keys" 2>&1 || {
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
    echo "$key $v"
  done
done >"$dir/cases"
xargs -P 2 -n 2 sh "$0" --one "$mpiexec" "$smoe" "$dir" <"$dir/cases" >"$dir/log"
cat "$dir/log"
pass=$(grep -c '^pass' "$dir/log")
fail=$(grep -c '^fail' "$dir/log")
cases=$(wc -l <"$dir/cases")
[ $((pass + fail)) -eq "$cases" ] || { echo "FAIL: $((pass + fail)) results for $cases cases"; fail=$((fail + 1)); }
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
