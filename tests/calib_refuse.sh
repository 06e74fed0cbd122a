#!/bin/sh
# smoe sim --calibrate refuses what it cannot measure before it measures
# anything (with SMOE_CALIB_DEBUG set the measurement prints a line per
# probe set: a refusal must come with none): one rank, layers larger than
# the machine, a profile that cannot be written; and a profile used on more
# devices than its hosts hold says how many hosts that makes and how to
# calibrate for one host; one measured without the progress thread is
# refused across slices.
# usage: calib_refuse.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
. "$(dirname "$0")/check_lib.sh"
# NAME RC PATTERN NP ARGS...: under NP ranks, exit RC with one 'smoe:' line
# matching PATTERN, no measurement line and no profile written
refused() {
  name=$1 want=$2 pat=$3 np=$4
  shift 4
  SMOE_CALIB_DEBUG=1 timeout 120 "$mpiexec" -n "$np" "$smoe" sim --calibrate "$@" \
    >"$dir/out" 2>"$dir/err"
  rc=$?
  line=$(grep '^smoe:' "$dir/err")
  if [ "$rc" -eq "$want" ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ] &&
     echo "$line" | grep -q -- "$pat" && ! grep -Eq '^(probe|gather|layer|reduce)' "$dir/err" &&
     [ ! -s "$dir/out" ] && [ -z "$(ls "$dir" | grep '^hw')" ]; then
    ok "$name: $line"
  else
    bad "$name: exit $rc (want $want), stderr: $(head -c 600 "$dir/err")"
  fi
}
refused "one rank" 2 "needs at least 2 MPI ranks" 1 --out "$dir/hw.yml"
# layers timed whole far beyond any machine's memory: smoe train's check
refused "layers over the memory" 2 "GiB per rank (one layer of each kind whole.*smaller --model" \
  2 --model deepseek3-671b override_model_config=true base_moe_mlp_dim=32768 --out "$dir/hw.yml"
refused "an unwritable profile" 1 "$dir/no/such/hw.yml: cannot write the profile: No such file" \
  2 --out "$dir/no/such/hw.yml"
# a profile of hosts of 2 ranks on 4 devices: 2 hosts, whatever the
# ranks' placement; the message says so and names the one-host remedy
cat >"$dir/p2.yml" <<'YML'
name: two-ranks
kind: cpu
progress: calls
devices_per_chip: 1
peak_flops: 1e10
hbm_bytes: 1e9
hbm_bandwidth: 1e10
ici_bandwidth: 1e9
ici_links: 1
ici_latency: 1e-5
devices_per_node: 2
dcn_bandwidth: 1e9
dcn_latency: 1e-5
collective_engines: 2
complete: true
YML
# NAME PATTERN ARGS...: smoe sim ARGS exits 2 with one line matching PATTERN
sim_refused() {
  name=$1 pat=$2
  shift 2
  "$smoe" sim "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "$pat" "$dir/err"; then
    ok "$name: $(cat "$dir/err")"
  else
    bad "$name: exit $rc, $(cat "$dir/err")"
  fi
}
sim_refused "2-rank profile on 4 devices" \
  "hosts of 2 ranks.*4 devices span 2 hosts.*mpirun -np 4 smoe sim --calibrate" \
  --devices 4 --hardware "$dir/p2.yml"
# slices are hosts whatever the profile's host size: said so (not "span 1
# hosts"), for gathers across them (dcn fsdp) and for the gradients'
# all-reduce alone (dcn data: HSDP, no gather crosses)
for dcn in dcn_fsdp_parallelism dcn_data_parallelism; do
  sim_refused "calls profile across slices ($dcn)" \
    "across the 2 slices is not modelled.*--progress-thread" \
    --devices 2 --slices 2 $dcn=2 --hardware "$dir/p2.yml"
done
summary
