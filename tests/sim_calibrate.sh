#!/bin/sh
# smoe sim --calibrate under 2 ranks: the profile it writes is one the
# simulator loads (--hardware FILE), every measured rate is a positive
# finite number, it records the progress mode it was measured under, and a
# profile that cannot be written is one error line and a non-zero exit;
# it times the BLAS kernel smoe train runs.
# usage: sim_calibrate.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
. "$(dirname "$0")/check_lib.sh"
# NAME VALUE CONDITION: ok when the awk condition on v holds
check_val() {
  if awk -v v="$2" "BEGIN { exit !($3) }"; then ok "$1 = $2"; else bad "$1 is '$2'"; fi
}
finite='v + 0 > 0 && v + 0 < 1e300'
unit='v + 0 > 0 && v + 0 <= 1'
# the profile through a symbolic link: written through it, the link kept
# (the temporary file and rename are for a regular file or a new one)
: >"$dir/hw-target.yml"
ln -s hw-target.yml "$dir/hw.yml"
if timeout 300 "$mpiexec" -n 2 "$smoe" sim --calibrate --out "$dir/hw.yml" >"$dir/out" 2>"$dir/err"; then
  ok "calibrate ran"
else
  bad "calibrate failed: $(tail -3 "$dir/err")"
fi
if [ -L "$dir/hw.yml" ] && grep -q '^peak_flops:' "$dir/hw-target.yml"; then
  ok "written through a symbolic link, the link kept"
else
  bad "the symbolic link: $(ls -l "$dir")"
fi
for k in peak_flops gemm_small_flops hbm_bandwidth ici_bandwidth a2a_bandwidth op_overhead \
         compute_scale reduce_lag_bandwidth; do
  check_val "$k" "$(sed -n "s/^$k: *\([^ ]*\).*/\1/p" "$dir/hw.yml")" "$finite"
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
check_val core_share "$(sed -n 's/^core_share: *\([^ ]*\).*/\1/p' "$dir/hw.yml")" "$unit"
check_val layer_time "$(sed -n 's/^# layer_time \([^ ]*\) s: .*/\1/p' "$dir/hw.yml")" "$finite"
# one host: both ranks on its fast interconnect
if grep -q '^# 1 host(s) of 2 rank(s)' "$dir/hw.yml" && grep -q '^devices_per_node: 2 ' "$dir/hw.yml"; then
  ok "one host of 2 ranks"
else
  bad "the hosts: $(grep -E 'host|devices_per_node' "$dir/hw.yml")"
fi
# one host: the within-host figures from a layer's gathers and reductions
# as smoe train issues them (src/calib/layer_gathers.c), with the bytes of
# a step of the model's layers for bench/profile_drift.sh; a latency is a
# fitted intercept, which noise can put at 0 (and a 0 of a key that is
# not required is not written)
for k in ici_bandwidth ici_latency ici_reduce_bandwidth ici_reduce_latency; do
  line=$(grep "^$k:" "$dir/hw.yml")
  v=$(echo "$line" | sed 's/^[^:]*: *\([^ ]*\).*/\1/')
  case $k in
    *latency) cond='v + 0 >= 0 && v + 0 < 10' ;;
    *) cond="$finite" ;;
  esac
  if [ "$k" = ici_reduce_latency ] && [ -z "$line" ]; then
    ok "$k = 0 (not written)"
  elif echo "$line" | grep -Eq "together as smoe train does|the same reductions" &&
     awk -v v="$v" "BEGIN { exit !($cond) }"; then
    ok "$k = $v, measured as training issues them"
  else
    bad "$k: '$line'"
  fi
done
check_val gather_core_fraction \
  "$(sed -n 's/^gather_core_fraction: *\([^ ]*\).*/\1/p' "$dir/hw.yml")" "$unit"
if grep -q '^# ici_step_bytes [1-9][0-9]*:' "$dir/hw.yml"; then
  ok "$(grep '^# ici_step_bytes' "$dir/hw.yml")"
else
  bad "no ici_step_bytes line"
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
# this run with OpenBLAS choosing its core (the suite pins one): the
# profile times the kernel smoe train runs, also where OpenBLAS does not
# know the CPU and smoe picks one (src/kernels/blas.c)
if timeout 300 env -u OPENBLAS_CORETYPE "$mpiexec" -n 2 "$smoe" sim --calibrate \
     --progress-thread --out "$dir/hwt.yml" >"$dir/out" 2>"$dir/err" &&
   grep -q '^progress: thread$' "$dir/hwt.yml"; then
  ok "--progress-thread: progress: thread"
else
  bad "--progress-thread: $(grep '^progress' "$dir/hwt.yml"; tail -3 "$dir/err")"
fi
core_cal=$(sed -n 's/.*(OpenBLAS core \([^,]*\), .*/\1/p' "$dir/hwt.yml")
core_train=$(env -u OPENBLAS_CORETYPE "$smoe" train --steps 1 2>&1 |
  sed -n 's/^BLAS core \([^,]*\),.*/\1/p')
if [ -n "$core_cal" ] && [ "$core_cal" = "$core_train" ]; then
  ok "the profile's BLAS core is smoe train's: $core_cal"
else
  bad "the profile's BLAS core '$core_cal', smoe train's '$core_train'"
fi
# a new file: its temporary file renamed over it, none left behind
if [ -f "$dir/hwt.yml" ] && [ -z "$(ls "$dir" | grep '\.yml\.')" ]; then
  ok "no temporary file left"
else
  bad "temporary files: $(ls "$dir")"
fi
timeout 300 "$mpiexec" -n 2 "$smoe" sim --calibrate --out "$dir/no/such/dir/hw.yml" \
  >/dev/null 2>"$dir/err"
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ]; then
  ok "an unwritable profile refused: $(grep '^smoe:' "$dir/err")"
else
  bad "unwritable profile: exit $rc, $(cat "$dir/err")"
fi
summary
