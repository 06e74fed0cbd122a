#!/bin/sh
# smoe train --device on one rank, no launcher: --device emul trains bit
# for bit as the CPU (losses, every parameter: cmp_runs at 0), with the
# routed bias update too (a bias row read and written back), and says so
# in the JSON ("device": "emul") and the header; the JSON has each step's
# device timings (device_step_ms, device_compute_ms: kernels within the
# step) and their medians, the CPU's none, and the trace a device lane; --matmul-dtype bf16 on
# emul trains bit for bit as on the CPU's bf16 twin, and not as fp32, and
# says "matmul_dtype": "bf16"; --device cuda either runs
# (a GPU is present) or is refused in one line naming it; an unknown
# device, two ranks' worth of mesh, and bf16 gathers on a device are
# refused in one line each.
# usage: train_device.sh SMOE CMP_RUNS
smoe=$1
cmp=$2
. "$(dirname "$0")/check_lib.sh"
args="--steps 3 ici_expert_parallelism=1 --quiet --json"
# one line on stderr, exit status 2, naming $2
refused() { # WHAT NEEDLE CMD...
  what=$1
  needle=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ "$rc" -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "$needle" "$dir/err"; then
    ok "$what: $(cat "$dir/err")"
  else
    bad "$what: exit $rc, stderr: $(cat "$dir/err")"
  fi
}

# shellcheck disable=SC2086
"$smoe" train $args --dump-params "$dir/cpu.bin" >"$dir/cpu.json" 2>"$dir/cpu.err" &&
  ok "cpu run" || bad "cpu run: $(tail -1 "$dir/cpu.err")"
# shellcheck disable=SC2086
"$smoe" train $args --device emul --dump-params "$dir/emul.bin" >"$dir/emul.json" \
  2>"$dir/emul.err" && ok "emul run" || bad "emul run: $(tail -1 "$dir/emul.err")"
if "$cmp" "$dir/cpu.json" "$dir/cpu.bin" "$dir/emul.json" "$dir/emul.bin" 0 >"$dir/cmp" 2>&1; then
  ok "--device emul == cpu, bitwise: $(grep worst "$dir/cmp" | tr '\n' ' ')"
else
  bad "--device emul differs from cpu: $(cat "$dir/cmp")"
fi
# the aux-loss-free bias update, which reads and writes a bias row on a device
bias="override_model_config=true routed_bias=true routed_bias_update_rate=0.01"
for d in cpu emul; do
  # shellcheck disable=SC2086
  "$smoe" train $args $bias --device $d --dump-params "$dir/${d}b.bin" >"$dir/${d}b.json" \
    2>"$dir/${d}b.err" || bad "$d run with the bias update: $(tail -1 "$dir/${d}b.err")"
done
if "$cmp" "$dir/cpub.json" "$dir/cpub.bin" "$dir/emulb.json" "$dir/emulb.bin" 0 >"$dir/cmp" 2>&1; then
  ok "with the routed bias update: emul == cpu, bitwise"
else
  bad "with the routed bias update: emul differs from cpu: $(cat "$dir/cmp")"
fi
grep -q '"device":[[:space:]]*"emul"' "$dir/emul.json" && grep -q '"device":[[:space:]]*"cpu"' "$dir/cpu.json" &&
  ok "JSON device" || bad "JSON device field"
# device timings: each step's device step and kernels (0 < kernels <= step),
# their medians in the summary, none on the CPU; the trace's device lane
nums() { tr -d ' \t\n' <"$2" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
nums device_step_ms "$dir/emul.json" >"$dir/dstep"
nums device_compute_ms "$dir/emul.json" >"$dir/dcomp"
if [ "$(wc -l <"$dir/dstep")" -eq 3 ] &&
  paste "$dir/dstep" "$dir/dcomp" | awk '!($2 > 0 && $2 <= $1) { bad = 1 } END { exit bad }' &&
  grep -q '"median_device_step_ms"' "$dir/emul.json" && ! grep -q device_step "$dir/cpu.json"; then
  ok "device timings in the JSON: step, kernels (ms) $(paste -d/ "$dir/dstep" "$dir/dcomp" | tr '\n' ' ')"
else
  bad "device timings in the JSON: $(paste "$dir/dstep" "$dir/dcomp" | tr '\n' ' ')"
fi
"$smoe" train --steps 2 ici_expert_parallelism=1 --quiet --device emul --trace "$dir/t.json" \
  >/dev/null 2>"$dir/err" || bad "emul run with a trace: $(cat "$dir/err")"
n=$(grep -c '"ph":"X","pid":0,"tid":4' "$dir/t.json")
grep -q '"tid":4,"args":{"name":"device kernels"}' "$dir/t.json" && [ "$n" -gt 0 ] &&
  ok "the trace's device lane: $n spans" || bad "the trace has no device lane ($n spans)"
"$smoe" train --steps 1 ici_expert_parallelism=1 --device emul 2>&1 | grep -q '^device: emul' &&
  ok "header names the device" || bad "no device line in the header"
# the bf16 mode: emul against the CPU's twin, both against fp32
for d in cpu emul; do
  # shellcheck disable=SC2086
  "$smoe" train $args --device $d --matmul-dtype bf16 --dump-params "$dir/${d}16.bin" \
    >"$dir/${d}16.json" 2>"$dir/${d}16.err" || bad "$d bf16 run: $(tail -1 "$dir/${d}16.err")"
done
if "$cmp" "$dir/cpu16.json" "$dir/cpu16.bin" "$dir/emul16.json" "$dir/emul16.bin" 0 >"$dir/cmp" 2>&1; then
  ok "--matmul-dtype bf16: emul == cpu, bitwise"
else
  bad "--matmul-dtype bf16: emul differs from cpu: $(cat "$dir/cmp")"
fi
if "$cmp" "$dir/cpu.json" "$dir/cpu.bin" "$dir/cpu16.json" "$dir/cpu16.bin" 0 >/dev/null 2>&1; then
  bad "--matmul-dtype bf16 trains bit for bit as fp32: the mode is not on"
else
  ok "--matmul-dtype bf16 differs from fp32"
fi
grep -q '"matmul_dtype":[[:space:]]*"bf16"' "$dir/emul16.json" && ok "JSON matmul_dtype" ||
  bad "JSON matmul_dtype"

# shellcheck disable=SC2086
if "$smoe" train $args --device cuda >"$dir/out" 2>"$dir/err"; then
  ok "--device cuda ran (a GPU is here)"
elif [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "--device cuda" "$dir/err"; then
  ok "--device cuda without a GPU: $(cat "$dir/err")"
else
  bad "--device cuda: $(cat "$dir/err")"
fi
refused "unknown device" "'--device'" "$smoe" train --steps 1 --device tpu
refused "unknown matmul dtype" "'--matmul-dtype" "$smoe" train --steps 1 --matmul-dtype fp8
refused "bf16 gathers on a device" "fp32 only" \
  "$smoe" train --steps 1 ici_expert_parallelism=1 --device emul --gather-dtype bf16
summary
