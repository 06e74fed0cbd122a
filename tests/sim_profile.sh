#!/bin/sh
# smoe sim --profile: per-layer compute measured in a trace replaces the
# model's. Fixture (tests/data/sim/profile.json): dense forward 10 ms and
# backward 20 ms; MoE forward spans 30 ms (holding a 5 ms exchange), 20 and
# 28 ms: median 25; MoE backward 60 ms. The tiny model has 1 dense and 3 MoE
# layers, so the step's compute is (10 + 20) + 3 x (25 + 60) = 285 ms more
# than with the same trace at zero durations (same non-layer work). The
# same spans on a device's lane (tid 4) beside zero-length compute-lane
# ones give the same compute.
# usage: sim_profile.sh SMOE DATA_DIR
smoe=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/"dur":[0-9]*/"dur":0/' "$data/sim/profile.json" >"$dir/zero.json"
cm() {
  "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --hardware tpu7x \
    --profile "$1" --json | tr -d ' \n\t' |
    sed 's/.*"baseline":{"step_ms":[^,]*,"compute_ms":\([^,]*\),.*/\1/'
}
a=$(cm "$data/sim/profile.json")
b=$(cm "$dir/zero.json")
pass=0
fail=0
if awk -v a="$a" -v b="$b" 'BEGIN { d = a - b - 285; exit !(d < 1e-6 && d > -1e-6) }'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: compute with the profile $a ms, at zero $b ms: difference not 285" >&2
fi
# a device's trace (smoe train --device): the device lane's layer spans
# (tid 4) are read, not the compute lane's (the host's enqueue times, here
# at zero): the same 285 ms
awk '/"name":"[fb]wd L/ {
  z = $0; sub(/"dur":[0-9]*/, "\"dur\":0", z); print z
  d = $0; sub(/"tid":0/, "\"tid\":4", d); print d; next
} { print }' "$data/sim/profile.json" >"$dir/device.json"
c=$(cm "$dir/device.json")
if awk -v a="$a" -v c="$c" 'BEGIN { d = a - c; exit !(d < 1e-6 && d > -1e-6) }'; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: compute from the device lane $c ms, from the compute lane $a ms" >&2
fi
echo '{"traceEvents":[{"name":"embed","ph":"X","pid":0,"tid":0,"ts":0,"dur":5}]}' >"$dir/none.json"
if "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --hardware tpu7x \
     --profile "$dir/none.json" >/dev/null 2>"$dir/err"; then
  fail=$((fail + 1))
  echo "FAIL: a profile without layer spans was accepted" >&2
elif grep -q "argument '--profile .*': no 'fwd L<n>" "$dir/err"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: wrong message: $(cat "$dir/err")" >&2
fi
echo "{" >"$dir/bad.json"
if "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --hardware tpu7x \
     --profile "$dir/bad.json" >/dev/null 2>"$dir/err"; then
  fail=$((fail + 1))
  echo "FAIL: a malformed trace was accepted" >&2
else
  pass=$((pass + 1))
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
