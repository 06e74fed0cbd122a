#!/bin/sh
# smoe train --device on one rank, no launcher: --device emul trains bit
# for bit as the CPU (losses, every parameter: cmp_runs at 0) and says so
# in the JSON ("device": "emul") and the header; --device cuda either runs
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
grep -q '"device":[[:space:]]*"emul"' "$dir/emul.json" && grep -q '"device":[[:space:]]*"cpu"' "$dir/cpu.json" &&
  ok "JSON device" || bad "JSON device field"
"$smoe" train --steps 1 ici_expert_parallelism=1 --device emul 2>&1 | grep -q '^device: emul' &&
  ok "header names the device" || bad "no device line in the header"

# shellcheck disable=SC2086
if "$smoe" train $args --device cuda >"$dir/out" 2>"$dir/err"; then
  ok "--device cuda ran (a GPU is here)"
elif [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q -- "--device cuda" "$dir/err"; then
  ok "--device cuda without a GPU: $(cat "$dir/err")"
else
  bad "--device cuda: $(cat "$dir/err")"
fi
refused "unknown device" "'--device'" "$smoe" train --steps 1 --device tpu
refused "bf16 gathers on a device" "fp32 only" \
  "$smoe" train --steps 1 ici_expert_parallelism=1 --device emul --gather-dtype bf16
summary
