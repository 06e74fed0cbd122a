#!/bin/sh
# smoe sim --profile is linear in its trace: a legal trace of one row with
# every pass and kind's 4096 sampled layer spans (a 130 us span holding
# twelve 5 us exchanges: 70 us of compute) and 200,000 exchanges. The
# layer times used to rescan the row for every layer span (spans x events:
# tens of CPU seconds here, minutes on a long run's trace); now they cost
# O(n log n). A CPU-time ceiling (ulimit -t, robust to a loaded machine)
# far above the linear reader's need is the liveness bound.
# usage: trace_linear.sh SMOE
smoe=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0
awk 'BEGIN {
  print "{\"traceEvents\":["
  printf "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"r\"}}"
  split("fwd fwd bwd bwd", P, " "); split("dense moe dense moe", K, " ")
  for (i = 0; i < 4096; i++) for (k = 1; k <= 4; k++) {
    printf ",\n{\"name\":\"%s L%d %s\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":%d,\"dur\":130}",
           P[k], i, K[k], ts
    for (j = 0; j < 12; j++)
      printf ",\n{\"name\":\"A2A\",\"ph\":\"X\",\"pid\":0,\"tid\":2,\"ts\":%d,\"dur\":5}", ts + 10 * j + 2
    ts += 150
  }
  print "\n]}" }' >"$dir/big.json"
(
  ulimit -t 10
  "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --hardware tpu7x \
    --profile "$dir/big.json" >"$dir/out" 2>"$dir/err"
)
rc=$?
if [ "$rc" -eq 0 ] && grep -q "dense 0.07 / 0.07, MoE 0.07 / 0.07 ms" "$dir/out"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: exit $rc (137/152: out of CPU time), $(grep 'compute per' "$dir/out") $(cat "$dir/err")" >&2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
