#!/bin/sh
# smoe sim --calibrate under 2 ranks: the profile it writes is one the
# simulator loads (--hardware FILE), every measured rate is a positive
# finite number, it records the progress mode it was measured under, and a
# profile that cannot be written is one error line and a non-zero exit.
# usage: sim_calibrate.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
if timeout 300 "$mpiexec" -n 2 "$smoe" sim --calibrate --out "$dir/hw.yml" >"$dir/out" 2>"$dir/err"; then
  ok "calibrate ran"
else
  bad "calibrate failed: $(tail -3 "$dir/err")"
fi
for k in peak_flops gemm_small_flops hbm_bandwidth ici_bandwidth a2a_bandwidth op_overhead \
         compute_scale reduce_lag_bandwidth; do
  v=$(sed -n "s/^$k: *\([^ ]*\).*/\1/p" "$dir/hw.yml")
  if awk -v v="$v" 'BEGIN { exit !(v + 0 > 0 && v + 0 < 1e300) }'; then
    ok "$k = $v"
  else
    bad "$k is '$v'"
  fi
done
# each figure's spread over its interleaved rounds and the part of a core a
# rank had (CPU time over wall time: in (0, 1])
for k in peak_flops gemm_small_flops op_overhead hbm_bandwidth optimizer_rate ici_bandwidth \
         a2a_bandwidth compute_scale; do
  line=$(grep "^# spread $k " "$dir/hw.yml")
  if echo "$line" | awk '{ exit !(NF == 6 && $4 + 0 >= 0 && $4 + 0 < 1e300 && $5 == "share" &&
                                  $6 + 0 > 0 && $6 + 0 <= 1.0001) }'; then
    ok "$line"
  else
    bad "spread of $k: '$line'"
  fi
done
# the share of a core the rates are given at (in (0, 1]), and the layers'
# measured time beside compute_scale
v=$(sed -n 's/^core_share: *\([^ ]*\).*/\1/p' "$dir/hw.yml")
if awk -v v="$v" 'BEGIN { exit !(v + 0 > 0 && v + 0 <= 1) }'; then
  ok "core_share = $v"
else
  bad "core_share is '$v'"
fi
v=$(sed -n 's/^# layer_time \([^ ]*\) s: .*/\1/p' "$dir/hw.yml")
if awk -v v="$v" 'BEGIN { exit !(v + 0 > 0 && v + 0 < 1e300) }'; then
  ok "layer_time = $v"
else
  bad "layer_time is '$v'"
fi
# one host: both ranks on its fast interconnect
if grep -q '^# 1 host(s) of 2 rank(s)' "$dir/hw.yml" && grep -q '^devices_per_node: 2 ' "$dir/hw.yml"; then
  ok "one host of 2 ranks"
else
  bad "the hosts: $(grep -E 'host|devices_per_node' "$dir/hw.yml")"
fi
if "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 \
     --hardware "$dir/hw.yml" --json >"$dir/sim.json" 2>"$dir/err" &&
   grep -q '"step_ms"' "$dir/sim.json"; then
  ok "the simulator loads the measured profile"
else
  bad "the simulator refused the profile: $(head -2 "$dir/err")"
fi
# the progress mode the profile was measured under: calls (the default on
# one host, as smoe train's), thread with --progress-thread
if grep -q '^progress: calls$' "$dir/hw.yml"; then
  ok "progress: calls"
else
  bad "progress without --progress-thread: $(grep '^progress' "$dir/hw.yml")"
fi
if timeout 300 "$mpiexec" -n 2 "$smoe" sim --calibrate --progress-thread --out "$dir/hwt.yml" \
     >"$dir/out" 2>"$dir/err" && grep -q '^progress: thread$' "$dir/hwt.yml"; then
  ok "--progress-thread: progress: thread"
else
  bad "--progress-thread: $(grep '^progress' "$dir/hwt.yml"; tail -3 "$dir/err")"
fi
timeout 300 "$mpiexec" -n 2 "$smoe" sim --calibrate --out "$dir/no/such/dir/hw.yml" \
  >/dev/null 2>"$dir/err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ]; then
  ok "an unwritable profile refused: $(grep '^smoe:' "$dir/err")"
else
  bad "unwritable profile: exit $rc, $(cat "$dir/err")"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
