#!/bin/sh
# Each row of smoe sim says what it simulates: the executor (--json: the
# row's "executor"; the text table: its last column). On an accelerator
# profile the baseline is XLA's scan, prefetch*, legacy and the scenario's
# variants MaxText's path, the uniform depth and the budgeted plan smoe's
# schedule in XLA's dataflow; on a cpu profile every row is smoe's runtime.
# usage: sim_executor.sh SMOE DATA_DIR
smoe=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0
check() { # STATUS WHAT
  if [ "$1" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2" >&2; fi
}
# FILE ROW EXECUTOR: the JSON row's executor
row() {
  tr -d ' \n\t' <"$1" | grep -q "\"$2\":{\"step_ms\":[^{}]*{[^{}]*},\"executor\":\"$3\""
  check $? "$1: row $2 is not '$3'"
}
"$smoe" sim --scenario seed --json >"$dir/seed.json"
check $? "smoe sim --scenario seed --json"
row "$dir/seed.json" baseline xla_scan
for r in prefetch prefetch_shared_queue legacy prefetch_ep_as_dp prefetch_ring_of_experts; do
  row "$dir/seed.json" $r maxtext
done
row "$dir/seed.json" uniform_depth_1 xla_prefetch
n=$(tr -d ' \n\t' <"$dir/seed.json" | grep -o '"executor":' | wc -l)
[ "$n" -eq 7 ]
check $? "seed: $n executors for 7 rows"
"$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 --hardware tpu7x \
  --hbm-budget 20M --json >"$dir/tpu.json"
check $? "smoe sim on tpu7x --hbm-budget --json"
row "$dir/tpu.json" budgeted xla_prefetch
"$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 \
  --hardware "$data/hardware/cpu-mpi.yml" --hbm-budget 20M --json >"$dir/cpu.json"
check $? "smoe sim on cpu-mpi --json"
for r in baseline prefetch prefetch_shared_queue legacy budgeted; do
  row "$dir/cpu.json" $r smoe_runtime
done
"$smoe" sim --scenario seed >"$dir/seed.txt"
grep -q '^schedule .* peak HBM  executor$' "$dir/seed.txt"
check $? "the text table has no executor column"
grep -q '^baseline .*  xla_scan$' "$dir/seed.txt" &&
  grep -q '^uniform_depth_1 .*  xla_prefetch$' "$dir/seed.txt" &&
  grep -q '^prefetch_ep_as_dp .*  maxtext$' "$dir/seed.txt"
check $? "the text rows do not name their executors"
# MaxText's gathered dtype, a declared reading: fp32 is the code's default
# (the same rows), bf16 changes only MaxText's rows and says so; a cpu
# profile, a bad value and a bad scenario value are refused in one line
# (the tables before the readings' section, which varies what is not set)
main_rows() { sed '/^predicted under every reading/,$d' "$1"; }
main_rows "$dir/seed.txt" >"$dir/seed-main.txt"
"$smoe" sim --scenario seed --maxtext-gather-dtype fp32 >"$dir/fp32-all.txt" &&
  main_rows "$dir/fp32-all.txt" | grep -v '^reading: ' >"$dir/fp32.txt" &&
  cmp -s "$dir/fp32.txt" "$dir/seed-main.txt"
check $? "--maxtext-gather-dtype fp32 is not the default"
"$smoe" sim --scenario seed --maxtext-gather-dtype stored >"$dir/stored-all.txt" &&
  main_rows "$dir/stored-all.txt" | cmp -s - "$dir/seed-main.txt" &&
  grep -q ': 12 combinations$' "$dir/stored-all.txt"
check $? "--maxtext-gather-dtype stored: the default's rows, the reading not varied"
"$smoe" sim --scenario seed --maxtext-gather-dtype bf16 >"$dir/bf16.txt"
check $? "--maxtext-gather-dtype bf16"
main_rows "$dir/bf16.txt" >"$dir/bf16-main.txt"
grep -q "^reading: MaxText's prefetch path gathers bf16" "$dir/bf16-main.txt" &&
  [ "$(grep '^baseline ' "$dir/bf16-main.txt")" = "$(grep '^baseline ' "$dir/seed-main.txt")" ] &&
  [ "$(grep '^prefetch ' "$dir/bf16-main.txt")" != "$(grep '^prefetch ' "$dir/seed-main.txt")" ]
check $? "bf16: not said, or the baseline moved, or MaxText's row did not"
refused() { # PATTERN ARGS...: exit 2 and one line
  pat=$1
  shift
  "$smoe" sim "$@" >/dev/null 2>"$dir/err"
  [ $? -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q "$pat" "$dir/err"
  check $? "sim $*: $(cat "$dir/err")"
}
refused "argument '--maxtext-gather-dtype': MaxText's prefetch path is simulated on tpu and gpu" \
  --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 \
  --hardware "$data/hardware/cpu-mpi.yml" --maxtext-gather-dtype bf16
refused "argument '--maxtext-gather-dtype int8': expected stored, fp32 or bf16" --scenario seed \
  --maxtext-gather-dtype int8
sed 's/^prefetch_depth: 1$/prefetch_depth: 1\nmaxtext_gather_dtype: fp8/' \
  "$SMOE_CONFIG_DIR/scenarios/seed.yml" >"$dir/scn.yml"
refused "scn.yml:[0-9]*:[0-9]*: maxtext_gather_dtype: expected stored, fp32 or bf16" --scenario "$dir/scn.yml"
refused "argument '--reduce-engine tensorcore': expected shared or own" --scenario seed \
  --reduce-engine tensorcore
refused "argument '--reduce-engine': collective engines are an accelerator's" \
  --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 \
  --hardware "$data/hardware/cpu-mpi.yml" --reduce-engine own
sed 's/^collective_engines: 4 /collective_engines: 2 /' "$SMOE_CONFIG_DIR/hardware/tpu7x.yml" \
  >"$dir/one.yml"
refused "argument '--reduce-engine': profile tpu7x has one collective engine a device" \
  --scenario seed --hardware "$dir/one.yml" --reduce-engine own
sed 's/^prefetch_depth: 1$/prefetch_depth: 1\nreduce_engine: sparsecore/' \
  "$SMOE_CONFIG_DIR/scenarios/seed.yml" >"$dir/scn.yml"
refused "scn.yml:[0-9]*:[0-9]*: reduce_engine: expected shared or own" --scenario "$dir/scn.yml"
# a row whose peak exceeds a device's HBM (tpu7x: 192 GiB a chip, 2
# devices: 96 GiB = 103079215104 bytes) is named on a line after the table
# and flagged in the JSON; the tiny model fits a cpu profile's 6.4e9 bytes
run="$SMOE_CONFIG_DIR/public-runs/check/deepseek3-671b-bf16-tpu7x-4x4x8.yml"
"$smoe" sim --scenario "$run" >"$dir/fit.txt" && "$smoe" sim --scenario "$run" --json >"$dir/fit.json"
check $? "smoe sim --scenario deepseek3 without EP"
over=$(grep "^over a device's HBM (96.0 GiB of tpu7x): " "$dir/fit.txt")
case "$over" in *" prefetch "*GiB*) ! echo "$over" | grep -q baseline ;; *) false ;; esac
check $? "the rows over HBM: '$over'"
tr -d ' \n\t' <"$dir/fit.json" >"$dir/fit1.json"
grep -q '"device_hbm_bytes":103079215104,' "$dir/fit1.json" &&
  grep -q '"baseline":{[^}]*"fits_hbm":true' "$dir/fit1.json" &&
  grep -q '"prefetch":{[^}]*"fits_hbm":false' "$dir/fit1.json"
check $? "the JSON's device_hbm_bytes and fits_hbm"
! grep -q "^over a device's HBM" "$dir/seed.txt"
check $? "the seed's rows all fit"
tr -d ' \n\t' <"$dir/cpu.json" >"$dir/cpu1.json"
grep -q '"device_hbm_bytes":6400000000,' "$dir/cpu1.json" &&
  ! grep -q '"fits_hbm":false' "$dir/cpu1.json" && grep -q '"fits_hbm":true' "$dir/cpu1.json"
check $? "the tiny model fits the cpu profile"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
