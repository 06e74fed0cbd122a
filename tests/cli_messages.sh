#!/bin/sh
# What smoe says about hostile arguments and files, one line each, quoting
# what the user typed and escaping what a file holds; the cases that need
# smoe train run on one rank.
# usage: cli_messages.sh MPIEXEC SMOE DATA_DIR
mpiexec=$1
smoe=$2
data=$3
. "$(dirname "$0")/check_lib.sh"
# RC PATTERN CMD...: CMD exits RC with one 'smoe:' line on stderr matching
# the extended regular expression PATTERN
says() {
  want=$1 pat=$2
  shift 2
  "$@" >"$dir/out" 2>"$dir/err"
  rc=$?
  if [ "$rc" -eq "$want" ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ] &&
     grep -Eq "^smoe: $pat" "$dir/err"; then
    ok "$(grep '^smoe:' "$dir/err" | cut -c1-160)"
  else
    bad "$*: exit $rc (want $want), expected /$pat/: $(head -c 600 "$dir/err")"
  fi
}
train1() { timeout 120 "$mpiexec" -n 1 "$smoe" train "$@"; }
cfg=$SMOE_CONFIG_DIR
sim_tiny() { "$smoe" sim --base "$cfg/train.yml" --model tiny --devices 1 "$@"; }

# one reader of every byte count: 0 holds nothing (train and sim alike);
# the README's grammar has no exponent; an error quotes what was typed
says 2 "argument '--hbm-budget 0': must be at least 1 byte" train1 --steps 1 --hbm-budget 0
says 2 "argument '--hbm-budget 0': must be at least 1 byte" sim_tiny --hardware h100 --hbm-budget 0
says 2 "argument '--max-memory 0': must be at least 1 byte" train1 --steps 1 --max-memory 0
says 2 "argument '--hbm-budget 1e3': expected a byte count" sim_tiny --hardware h100 --hbm-budget 1e3
says 2 "argument '--hbm-budget 1000K': leaves -?[0-9]+ bytes for gathered layers" \
  train1 --steps 1 --quiet --hbm-budget 1000K --hardware "$data/hardware/cpu-mpi.yml"
says 2 "--reduce-dtype 'int8': not a reduce dtype \(fp32\|bf16\)$" train1 --steps 1 --reduce-dtype int8

# a profile's collective_engines: 0 is no engine, which nothing models
sed 's/^collective_engines: .*/collective_engines: 0/' "$cfg/hardware/h100.yml" >"$dir/hw0.yml"
says 2 "$dir/hw0.yml:[0-9]+:21: 'collective_engines' = 0 must be in \[1, 64\]" \
  sim_tiny --hardware "$dir/hw0.yml"

# sim --hardware cpu-mpi without the profile says how to measure it, as
# train --hbm-budget does (a config directory without one)
mkdir -p "$dir/cfg/hardware"
says 2 "argument '--hardware cpu-mpi': no cpu-mpi profile $dir/cfg/hardware/cpu-mpi.yml .*mpirun -np N smoe sim --calibrate --out" \
  env SMOE_CONFIG_DIR="$dir/cfg" "$smoe" sim --devices 1 --hardware cpu-mpi
says 2 "argument '--hbm-budget' .*no cpu-mpi profile $dir/cfg/hardware/cpu-mpi.yml .*mpirun -np N smoe sim --calibrate --out" \
  env SMOE_CONFIG_DIR="$dir/cfg" "$smoe" train --steps 1 --hbm-budget 1G

# schedules: a NaN is placed at its line:col; --schedule paths that are
# not UTF-8 become valid JSON keys (the byte as \xFF)
# a fractional batch needs the context axis to split each sequence
sim_ds() { "$smoe" sim --model deepseek2-16b --devices 16 --hardware tpu7x "$@"; }
says 2 "argument 'per_device_batch_size=0.5': per_device_batch_size = 0.5: with 1-way context parallelism smoe sim needs it times the context axis a whole number" \
  sim_ds per_device_batch_size=0.5
says 2 "argument 'max_target_length=2047': max_target_length = 2047: the context axis \(2 ways\) must divide it" \
  sim_ds per_device_batch_size=0.5 ici_context_parallelism=2 max_target_length=2047
if sim_ds per_device_batch_size=0.5 ici_context_parallelism=2 2>"$dir/err" |
   grep -q "batch 1 x seq 2048 per 2 devices (context 2: 1024 tokens per device)"; then
  ok "sim: per_device_batch_size 0.5 on 2-way context parallelism is a sequence's half a device"
else bad "sim: a fractional batch on the context axis: $(head -c 300 "$dir/err")"; fi
sim_tiny --hardware h100 --schedule-out "$dir/s.json" >/dev/null 2>&1 || bad "sim --schedule-out"
sed 's/"layers":.*/"layers":\tNaN,/' "$dir/s.json" >"$dir/nan.json"
says 2 "$dir/nan.json:4:12: not JSON$" train1 --steps 1 --schedule "$dir/nan.json"
ff=$(printf '\377')
cp "$dir/s.json" "$dir/a$ff.json"
cp "$dir/s.json" "$dir/b.json"
train1 --steps 2 --quiet --json --schedule "$dir/a$ff.json" --schedule "$dir/b.json" >"$dir/out" 2>"$dir/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -qF "\"$dir/a\\\\xFF.json\":" "$dir/out" &&
   ! LC_ALL=C grep -q "$ff" "$dir/out"; then
  ok "a schedule path's byte 0xFF as \\xFF in its JSON key"
else
  bad "--json keys of --schedule paths: exit $rc: $(grep -a '"runs"' -A1 "$dir/out" | head -3; head -3 "$dir/err")"
fi

# --plot (and --trace, --dump-params) that cannot be written: refused
# before the first step (no step line printed)
says 1 "argument '--plot $dir/no/p.svg': cannot write the file: No such file or directory" \
  train1 --steps 2 --trace "$dir/t.json" --plot "$dir/no/p.svg"
if grep -q "step *1/" "$dir/out"; then bad "--plot refused after training: $(head -2 "$dir/out")"; fi
says 1 "argument '--dump-params $dir/no/d.bin': cannot write the file" \
  train1 --steps 2 --dump-params "$dir/no/d.bin"
if grep -q "step *1/" "$dir/out"; then bad "--dump-params refused after training"; fi

# LATEST's bytes, whatever they are, escaped in the message
mkdir "$dir/ck"
printf 'st\033[31mep\001\377\n' >"$dir/ck/LATEST"
says 1 "$dir/ck/LATEST: does not name a checkpoint \(expected step_NNNNNNNN, found 'st\\\\x1B\[31mep\\\\x01\\\\xFF'\)" \
  train1 --steps 1 --quiet --checkpoint-dir "$dir/ck" --resume
if LC_ALL=C grep -q "$(printf '\033')" "$dir/err"; then bad "an escape byte in the message"; fi

# smoe alone (no launcher) reports a failed write of its --json output
"$smoe" train --steps 1 --quiet --json >/dev/full 2>"$dir/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "^smoe: standard output: write error" "$dir/err"; then
  ok "--json >/dev/full: $(cat "$dir/err")"
else
  bad "--json >/dev/full: exit $rc, $(cat "$dir/err")"
fi
summary
