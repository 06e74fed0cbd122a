#!/bin/sh
# Bad input to smoe train under mpirun: one clear line from rank 0, every
# rank exits non-zero, no hang (each run under a timeout).
# usage: train_errors.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
err=$tmp/err

# WANT NP PATTERN ARGS...: WANT is the exit status, or "any" (non-zero,
# not the timeout's)
check_run() {
  want=$1
  np=$2
  pattern=$3
  shift 3
  timeout 60 "$mpiexec" -n "$np" "$smoe" train --steps 2 --quiet "$@" >/dev/null 2>"$err"
  rc=$?
  lines=$(grep -c '^smoe:' "$err")
  if [ "$want" = any ]; then ok_rc=$([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo 1); else
    ok_rc=$([ "$rc" -eq "$want" ] && echo 1); fi
  if [ -n "$ok_rc" ] && [ "$lines" -eq 1 ] && grep -Eq "^smoe: $pattern" "$err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: np $np smoe train $* -> exit $rc (want $want), $lines smoe line(s):" >&2
    sed 's/^/    /' "$err" | head -8 >&2
    echo "    expected: $pattern" >&2
  fi
}
expect() { check_run any "$@"; } # NP PATTERN ARGS...

expect 4 "4 MPI ranks: the mesh has 3 devices" ici_fsdp_parallelism=3
expect 3 "3 MPI ranks: cannot fill ici_fsdp_parallelism" ici_expert_parallelism=2
expect 3 "decoder/[a-z_]+/[a-z_/0-9]+ cannot be prefetched: uneven: layer dim [0-9] \(128\) does not divide into its 3 shards"
expect 4 "argument '--max-memory 1M': the plan needs [0-9]+ bytes per rank" --max-memory 1M ici_expert_parallelism=2
# the same byte-count forms as sim --hbm-budget (one parser)
expect 4 "argument '--max-memory 1MB': the plan needs [0-9]+ bytes per rank" --max-memory 1MB
expect 4 "argument '--max-memory 1Q': expected a byte count" --max-memory 1Q
expect 4 "/nonexistent/data.txt: cannot open the data file" --data /nonexistent/data.txt
expect 4 "argument 'num_experts=6': num_experts \(6\) is not divisible by the expert axis \(4\)" \
  ici_expert_parallelism=4 num_experts=6 override_model_config=true
expect 4 "argument '--gather bogus': expected coaxis or legacy" --gather bogus
expect 4 "argument '--steps 0': expected a positive integer" --steps 0
expect 4 "mesh axis 'tensor' has size 2" ici_tensor_parallelism=2 ici_fsdp_parallelism=2
expect 4 "argument '--devices': is set by the number of MPI ranks" --devices 4
expect 4 "argument 'ici_expert_parallelism=two': 'ici_expert_parallelism' must be an integer" \
  ici_expert_parallelism=two
expect 2 "argument '--model nope': unknown model 'nope'" --model nope
expect 2 ".*: the data file has [0-9]+ bytes; a sequence of max_target_length 100000 tokens needs" --data "$0" max_target_length=100000
expect 2 ".*/tests: the data file is a directory, not a regular file" --data "$(cd "$(dirname "$0")" && pwd)"
# not regular files: a FIFO would block the open (a hang), a device has no size
mkfifo "$tmp/fifo"
expect 2 ".*/fifo: the data file is a FIFO, not a regular file" --data "$tmp/fifo"
expect 2 "/dev/zero: the data file is a device, not a regular file" --data /dev/zero
expect 2 "argument 'vocab_size=100': 'vocab_size' must be >= 256 \(smoe train's tokens are the data file's bytes\) for smoe train, got 100" \
  vocab_size=100 override_model_config=true
expect 2 "argument 'adam_b2=0.99999999': 'adam_b2' must be in \[0, 1\) after rounding to float32" adam_b2=0.99999999
expect 2 "argument 'capacity_factor=1e-46': 'capacity_factor' must be <= 0 \(dropless\) or a finite number that stays > 0 in float32" \
  capacity_factor=1e-46
expect 2 "argument 'max_target_length=0': 'max_target_length' must be >= 1" max_target_length=0
# MaxText keys smoe train does not implement: exit 2, one line naming the
# key, where it is set and the value smoe implements
refused() { check_run 2 "$@"; } # NP PATTERN ARGS...
refused 4 "argument 'dropout_rate=0.1': dropout_rate: smoe train implements only dropout_rate: 0" \
  dropout_rate=0.1
refused 4 "argument 'opt_type=sgd': opt_type: smoe train implements only opt_type: adamw" opt_type=sgd
refused 2 "argument 'dtype=bfloat16': dtype: smoe train implements only dtype: float32" dtype=bfloat16
refused 2 "argument 'gradient_accumulation_steps=4': gradient_accumulation_steps: smoe train implements only gradient_accumulation_steps: 1" \
  gradient_accumulation_steps=4
refused 2 "argument 'n_routing_groups=2': n_routing_groups: smoe train implements only n_routing_groups: -1" \
  n_routing_groups=2
refused 2 "argument 'routed_score_func=softplus': routed_score_func: smoe train implements" \
  routed_score_func=softplus override_model_config=true
refused 2 "argument 'rope_type=llama3.1': rope_type:" rope_type=llama3.1
refused 2 "argument 'adamw_mask=\[.*\]': adamw_mask: pattern" "adamw_mask=['\\d']"
refused 4 "argument 'warmup_steps_fraction=-0.5': 'warmup_steps_fraction' must be a number satisfying ge=0.0 le=1.0, got '-0.5'" \
  warmup_steps_fraction=-0.5
# a model file (here the bundled one, written to a temporary file) that sets
# a refused key: the line names the file, line and column
cfgdir="$tmp/cfg"
mkdir "$cfgdir"
printf 'base_config: train.yml\ndropout_rate: 0.1\n' >"$cfgdir/dropout.yml"
cp "$(dirname "$smoe")/configs/base.yml" "$(dirname "$smoe")/configs/train.yml" "$cfgdir/" 2>/dev/null &&
  mkdir -p "$cfgdir/models" && cp "$(dirname "$smoe")/configs/models/tiny.yml" "$cfgdir/models/" &&
  refused 2 ".*/dropout.yml:2:[0-9]+: dropout_rate: smoe train implements only dropout_rate: 0" \
    --base "$cfgdir/dropout.yml"
# both progress-thread flags: refused rather than the last one winning
refused 2 "argument '--no-progress-thread': contradicts the other progress-thread option" \
  --progress-thread --no-progress-thread
# --progress-thread on a library below MPI_THREAD_SERIALIZED (the test hook
# asks MPI_Init_thread for less than smoe does): refused with one line;
# without the flag (the default) the run goes on without a thread
for lv in single funneled; do
  LV=$(echo "$lv" | tr a-z A-Z)
  export SMOE_TEST_MPI_THREAD=$lv
  check_run 2 2 "argument '--progress-thread': the MPI library \(.*\) provides thread level MPI_THREAD_$LV; a progress thread needs MPI_THREAD_SERIALIZED" --progress-thread
  if timeout 60 "$mpiexec" -n 2 "$smoe" train --steps 1 >"$tmp/out" 2>"$err" &&
    grep -q '^progress thread: off (one host)$' "$tmp/out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: the default run at MPI_THREAD_$LV:" >&2
    tail -3 "$err" "$tmp/out" >&2
  fi
  unset SMOE_TEST_MPI_THREAD
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
