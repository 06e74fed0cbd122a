#!/bin/sh
# Every input file is read within its kind's size cap (core.h,
# SMOE_MAX_*_BYTES): /dev/zero, which never ends, and a file one byte over
# the cap (sparse: no disk) are refused with exit 2 and one line naming the
# file and the cap, for each reader: YAML (--base, --model, --rules,
# --hardware, --scenario), --params, --schedule, a checkpoint's
# manifest.json and a --trace read back by --profile. Before, the trace,
# hardware, scenario and manifest readers had no cap (/dev/zero grew until
# memory ran out) and a schedule's was 1 GiB. A memory ceiling (ulimit -v,
# not under ASan, which reserves terabytes of address space) makes a
# reader that loses its cap fail here instead of exhausting the machine.
# usage: input_bounds.sh SMOE
smoe=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0
[ -z "${ASAN_OPTIONS-}" ] && ulimit -v 8388608
train="train --base $SMOE_CONFIG_DIR/train.yml --model tiny --steps 1"
sim="sim --base $SMOE_CONFIG_DIR/train.yml --model tiny --devices 2"

# refused FILE MIB ARGS...: exit 2, one line "smoe: FILE: larger than MIB MiB"
refused() {
  f=$1
  mib=$2
  shift 2
  timeout 120 "$smoe" "$@" >/dev/null 2>"$dir/err"
  rc=$?
  lines=$(wc -l <"$dir/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] &&
     grep -q "^smoe: $f: larger than $mib MiB (smoe's limit for this file)$" "$dir/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: smoe $* -> exit $rc, $lines line(s):" >&2
    sed 's/^/    /' "$dir/err" >&2
    echo "    expected: smoe: $f: larger than $mib MiB (smoe's limit for this file)" >&2
  fi
}

# a sparse file one byte over MIB MiB
over() {
  truncate -s $(($2 * 1048576 + 1)) "$dir/$1"
  echo "$dir/$1"
}

z=/dev/zero
refused $z 4 plan --devices 4 --base $z
refused $z 4 plan --devices 4 --model $z
refused $z 4 plan --devices 4 --rules $z
refused $z 4 $sim --hardware $z
refused $z 4 sim --scenario $z
refused $z 16 plan --devices 4 --params $z
refused $z 32 $train --schedule $z
refused "$(over base.yml 4)" 4 plan --devices 4 --base "$dir/base.yml"
refused "$(over hw.yml 4)" 4 $sim --hardware "$dir/hw.yml"
refused "$(over params.json 16)" 16 plan --devices 4 --params "$dir/params.json"
refused "$(over sched.json 32)" 32 $train --schedule "$dir/sched.json"
refused "$(over trace.json 256)" 256 $sim --hardware tpu7x --profile "$dir/trace.json"
mkdir -p "$dir/ckpt/step_00000001"
echo step_00000001 >"$dir/ckpt/LATEST"
m=$(over ckpt/step_00000001/manifest.json 16)
refused "$m" 16 $train --steps 2 --checkpoint-dir "$dir/ckpt" --resume

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
