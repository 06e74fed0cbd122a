#!/bin/sh
# Every write is checked: output that cannot be written (/dev/full, a full
# file system) ends with exit 1 and a line naming what could not be
# written, never exit 0 with a truncated file; a parameter dump or a
# checkpoint that does not fit leaves nothing half-written. Also: 10,000
# overrides, non-UTF-8 paths in JSON, --version and every command's --help.
# (The parameter dump on /dev/full and on a full file system is
# test_train_writes, in process.)
# usage: cli_writes.sh MPIEXEC SMOE DATA_DIR
mpiexec=$1
smoe=$2
data=$3
pass=0
fail=0
dir=$(mktemp -d)
mnt=
cleanup() {
  [ -n "$mnt" ] && umount "$mnt" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1" >&2; sed 's/^/    /' "$dir/err" | head -8 >&2; }

# write_fails WHAT PATTERN CMD...: exit 1 and one smoe line matching PATTERN
write_fails() {
  what=$1
  pattern=$2
  shift 2
  "$@" 2>"$dir/err"
  rc=$?
  if [ "$rc" -eq 1 ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ] && grep -Eq "^smoe: $pattern" "$dir/err"; then
    ok "$what -> exit 1: $(grep '^smoe:' "$dir/err")"
  else
    bad "$what -> exit $rc, expected /$pattern/"
  fi
}

sim="sim --model deepseek2-16b --devices 16 ici_expert_parallelism=4 --hardware tpu7x --batch 1 --seq 2048"
# stdout on a full device
write_fails "plan --json >/dev/full" "standard output: write error: No space left on device" \
  sh -c "'$smoe' plan --model deepseek2-16b --devices 16 --json >/dev/full"
write_fails "plan (table) >/dev/full" "standard output: write error: No space left on device" \
  sh -c "'$smoe' plan --model deepseek2-16b --devices 16 >/dev/full"
write_fails "sim >/dev/full" "standard output: write error: No space left on device" \
  sh -c "'$smoe' $sim >/dev/full"
write_fails "sim --json >/dev/full" "standard output: write error: No space left on device" \
  sh -c "'$smoe' $sim --json >/dev/full"
write_fails "train --json >/dev/full (one process)" \
  "standard output: write error(: No space left on device| \(the output is incomplete\))" \
  sh -c "'$smoe' train --steps 1 --quiet --json >/dev/full"
write_fails "sim --trace /dev/full" "argument '--trace /dev/full': cannot write the file: No space left on device" \
  sh -c "'$smoe' $sim --trace /dev/full >/dev/null"

# a file system that fills up (a 1 MiB tmpfs; needs root to mount)
mnt=$dir/small
mkdir -p "$mnt"
if mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
  head -c 1000000 /dev/zero >"$mnt/fill" 2>/dev/null # leaves about 48 KiB
  write_fails "plan --json onto a full file system" \
    "standard output: write error: No space left on device" \
    sh -c "'$smoe' plan --model deepseek3-671b --devices 1024 ici_expert_parallelism=8 --json --all >'$mnt/plan.json'"
  rm -f "$mnt/plan.json"
  write_fails "sim --trace onto a full file system" \
    "argument '--trace $mnt/t.json': cannot write the file" \
    sh -c "'$smoe' sim --model deepseek3-671b --devices 1024 ici_expert_parallelism=8 --hardware tpu7x --batch 1 --seq 4096 --trace '$mnt/t.json' >/dev/null"
  rm -f "$mnt/t.json" "$mnt/fill"
  # a checkpoint that does not fit: the run fails, nothing is published
  timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 2 --quiet --checkpoint-dir "$mnt/ck" \
    >/dev/null 2>"$dir/err"
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
    grep -q "cannot write the shard file: No space left on device" "$dir/err" &&
    [ ! -e "$mnt/ck/LATEST" ] && [ ! -e "$mnt/ck/step_00000002" ]; then
    ok "a checkpoint onto a full file system: exit $rc, no LATEST, nothing published"
  else
    bad "a checkpoint onto a full file system -> exit $rc"
  fi
  umount "$mnt"
else
  echo "skip: no tmpfs can be mounted here (needs root): full-file-system cases not run"
fi
mnt=

# 10,000 overrides (were a fixed array in sim: a crash past 3000)
many=$(i=0; while [ $i -lt 10000 ]; do printf ' ici_expert_parallelism=4'; i=$((i + 1)); done)
for cmd in "plan --model deepseek2-16b --devices 16" "$sim"; do
  "$smoe" $cmd $many >"$dir/out" 2>"$dir/err"
  rc=$?
  "$smoe" $cmd ici_expert_parallelism=4 >"$dir/one" 2>&1
  if [ "$rc" -eq 0 ] && cmp -s "$dir/out" "$dir/one"; then
    ok "smoe ${cmd%% *} with 10000 overrides == with one"
  else
    bad "smoe ${cmd%% *} with 10000 overrides -> exit $rc"
  fi
done

# a path that is not UTF-8 in the JSON: escaped, the document valid UTF-8
p=$dir/$(printf 'p\377q').json
cp "$data/maxtext/sharding_info/deepseek2-16b/tpu7x-16/slice_1/rule_default/logical_shardings.json" "$p"
"$smoe" plan --model deepseek2-16b --devices 16 --params "$p" --json >"$dir/out" 2>"$dir/err"
rc=$?
if [ "$rc" -eq 0 ] && iconv -f UTF-8 -t UTF-8 "$dir/out" >/dev/null 2>&1 &&
  grep -q 'p\\\\xFFq.json' "$dir/out"; then
  ok "a non-UTF-8 --params path is written as \\xFF in valid UTF-8 JSON"
else
  bad "non-UTF-8 path -> exit $rc, $(grep -a '"source"' "$dir/out")"
fi

[ -c /dev/full ] && ok "/dev/full is still the device" || bad "/dev/full was replaced"

# --version and every command's --help
"$smoe" --version >"$dir/out" 2>"$dir/err"
if [ $? -eq 0 ] && grep -Eq '^smoe [0-9]+\.[0-9]+\.[0-9]+$' "$dir/out"; then
  ok "smoe --version: $(cat "$dir/out")"
else
  bad "smoe --version"
fi
for c in plan sim train; do
  "$smoe" "$c" --help >"$dir/out" 2>"$dir/err"
  if [ $? -eq 0 ] && grep -q "usage:" "$dir/out"; then ok "smoe $c --help"; else bad "smoe $c --help"; fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
