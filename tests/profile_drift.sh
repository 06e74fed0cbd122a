#!/bin/sh
# bench/profile_drift.sh, by hand on two made-up cpu profiles of 2 hosts.
# The compute and within-host figures alike; across hosts dcn_latency 1e-5
# then 5e-5 s, dcn_bandwidth 1.2e8 B/s, a cross-host step of 48000 bytes:
# as a latency that is 400 % (void); as the step's time, 1e-5 + 4e-4 s
# then 5e-5 + 4e-4 s, 9.8 % (held). The reductions the same way: 2e-5 and
# 2e-5 s at 8e7 then 6e7 B/s: 6.2e-4 then 8.2e-4 s, 32.3 % (void).
# One host with `# ici_step_bytes 13861`: ici_bandwidth 4e9 then 3e9 is
# 33 % (void) as a rate; as the step's time, 3e-5 + 13861 / 2e9 then
# 3.2e-5 + 13861 / 1.5e9 s, 11.7 % (held); its reductions 2e-4 s at 2e9
# then 1e9 B/s: 2.139e-4 then 2.277e-4 s, 6.5 %.
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
prof1() { # FILE ICI_BW ICI_LATENCY REDUCE_BW [STEP_BYTES]
  {
    echo "name: cpu-mpi"
    echo "kind: cpu"
    echo "peak_flops: 5e10"
    echo "ici_bandwidth: $2"
    echo "ici_latency: $3"
    echo "ici_reduce_bandwidth: $4"
    echo "ici_reduce_latency: 2e-4"
    echo "compute_scale: 1.4"
    echo "dcn_bandwidth: $2"
    echo "dcn_latency: $3"
    echo "# 1 host(s) of 4 rank(s)."
    [ -n "$5" ] && echo "# ici_step_bytes $5: bytes within the host per step of the model's"
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
prof1 "$dir/a.yml" 4e9 3e-5 2e9 ""
prof1 "$dir/b.yml" 3e9 3.2e-5 1e9 ""
check 1 "33% (ici_bandwidth)" "$dir/a.yml" "$dir/b.yml"
prof1 "$dir/a.yml" 4e9 3e-5 2e9 13861
prof1 "$dir/b.yml" 3e9 3.2e-5 1e9 13861
check 0 "12% (ici_step)" "$dir/a.yml" "$dir/b.yml"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
