#!/bin/sh
# bench/profile_drift.sh, by hand on two made-up cpu profiles of 2 hosts.
# The compute and within-host figures alike; across hosts dcn_latency 1e-5
# then 5e-5 s, dcn_bandwidth 1.2e8 B/s, a cross-host step of 48000 bytes:
# as a latency that is 400 % (void); as the step's time, 1e-5 + 4e-4 s
# then 5e-5 + 4e-4 s, 9.8 % (held). The reductions the same way: 2e-5 and
# 2e-5 s at 8e7 then 6e7 B/s: 6.2e-4 then 8.2e-4 s, 32.3 % (void).
# usage: profile_drift.sh SOURCE_DIR
top=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
prof() { # FILE LATENCY REDUCE_BW [STEP_BYTES]
  {
    echo "name: cpu-mpi"
    echo "kind: cpu"
    echo "peak_flops: 5e10"
    echo "ici_bandwidth: 4e9"
    echo "compute_scale: 1.4"
    echo "dcn_bandwidth: 1.2e8"
    echo "dcn_latency: $2"
    [ -n "$3" ] && echo "dcn_reduce_bandwidth: $3" && echo "dcn_reduce_latency: 2e-5"
    echo "# 2 host(s) of 2 rank(s)."
    [ -n "$4" ] && echo "# dcn_step_bytes $4: bytes from other hosts per cross-host step of the"
  } >"$1"
}
pass=0
fail=0
check() { # WANT_EXIT WANT_TEXT BEFORE AFTER
  out=$(sh "$top/bench/profile_drift.sh" "$3" "$4")
  rc=$?
  if [ "$rc" = "$1" ] && echo "$out" | grep -q "$2"; then
    pass=$((pass + 1))
    echo "ok: $out"
  else
    fail=$((fail + 1))
    echo "FAIL: exit $rc (expected $1), '$out' (expected '$2')" >&2
  fi
}
prof "$dir/a.yml" 1e-5 "" ""
prof "$dir/b.yml" 5e-5 "" ""
check 1 "400% (dcn_latency)" "$dir/a.yml" "$dir/b.yml"
prof "$dir/a.yml" 1e-5 "" 48000
prof "$dir/b.yml" 5e-5 "" 48000
check 0 "10% (dcn_step)" "$dir/a.yml" "$dir/b.yml"
prof "$dir/a.yml" 1e-5 8e7 48000
prof "$dir/b.yml" 1e-5 6e7 48000
check 1 "32% (dcn_reduce_step)" "$dir/a.yml" "$dir/b.yml"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
