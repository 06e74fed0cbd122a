#!/bin/sh
# Compressed gathers in smoe train (--gather-dtype bf16|int8, --reduce-dtype
# bf16): with each gather dtype the sharded runs equal the single-rank run
# with the same dtype over the whole 5-step trajectory (relative 5e-5,
# cmp_runs: losses and every parameter; not 1e-5 as for fp32: the fp32
# runs' reduction-order differences, ~3e-6 in the parameters from step 1 on
# (AdamW's first step on gradients near eps), move a few master weights
# across a bf16 or int8 rounding boundary, and each such flip is a step of
# 2^-8 or of a block's 1/127; measured after 5 steps: up to 1.3e-5 in the
# loss for bf16 and 2e-5 in a parameter tensor for int8; the growth step
# by step, and each step from the same state within 1e-5: train_wire_step),
# prefetch depths, legacy gathers and the shared queue are bitwise
# identical, a resumed run is bitwise the uninterrupted one, and the dtype
# changes the numbers (the runs are not the fp32 run). A bf16 reduction is
# deterministic (depth 0 == depth 1, bitwise) and not the fp32 reduction.
# Each schedule path runs once per dtype over MPI, two to a launch (depth
# 0 with the shared queue, depth 2 with legacy gathers); fsdp=4 and each
# path alone run in process in test_vrank.
# Bad values: one line, exit 2.
# usage: train_wire.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3
steps=5

. "$(dirname "$0")/runs_lib.sh"

# the losses of a run, one line (the dtype must move them)
losses() { grep '"loss"' "$dir/$1.json" | tr -d ' \t\n'; }
differ() { # A B WHAT
  [ "$(losses "$1")" != "$(losses "$2")" ]
  check $? "$3"
}

E2="ici_expert_parallelism=2"
TOL=5e-5
must_run f32 4 --steps $steps $E2
# int8: blocks of 8 fit every shard of the tiny model on these meshes
for w in "bf16" "int8 --int8-block 8"; do
  t=$(echo "$w" | cut -d' ' -f1)
  # shellcheck disable=SC2086
  G="--gather-dtype $w"
  must_run "${t}_ref" 1 --steps $steps $G per_device_batch_size=16
  must_run "${t}_e2" 4 --steps $steps $G $E2 &&
    same "${t}_ref" "${t}_e2" $TOL "$t: fsdp=2 x expert=2 vs single rank"
  must_run "${t}_e4" 4 --steps $steps $G ici_expert_parallelism=4 &&
    same "${t}_ref" "${t}_e4" $TOL "$t: expert=4 vs single rank"
  must_run "${t}_d0" 4 --steps $steps $G $E2 --prefetch-depth 0 --shared-queue &&
    same "${t}_e2" "${t}_d0" 0 "$t: prefetch off, shared queue == depth 1, dedicated, bitwise"
  must_run "${t}_d2" 4 --steps $steps $G $E2 --prefetch-depth 2 --gather legacy &&
    same "${t}_e2" "${t}_d2" 0 "$t: depth 2, legacy == depth 1, co-axis, bitwise"
  differ f32 "${t}_e2" "$t: the losses are not fp32's"
  grep -q "\"gather_dtype\":[[:space:]]*\"$t\"" "$dir/${t}_e2.json"
  check $? "$t: the JSON names the gather dtype"
  # resume after 3 of 5 steps (the schedule's length the 5-step run's
  # default): bitwise the uninterrupted run
  L5="learning_rate_schedule_steps=$steps"
  must_run "${t}_part" 4 --steps 3 $G $E2 $L5 --checkpoint-dir "$dir/ck_$t"
  cp -r "$dir/ck_$t" "$dir/ck3_$t"
  must_run "${t}_res" 4 --steps $steps $G $E2 $L5 --checkpoint-dir "$dir/ck_$t" --resume &&
    same "${t}_e2" "${t}_res" 0 "$t: resume at step 3 == uninterrupted, bitwise"
done

# a checkpoint of bf16 gathers resumed with fp32 ones: the change is named
must_run chg 4 --steps $steps $E2 $L5 --checkpoint-dir "$dir/ck3_bf16" \
  --resume
grep -q '"checkpoint":[[:space:]]*"gathers bf16, reductions fp32"' "$dir/chg.json" &&
  grep -q '"now":[[:space:]]*"gathers fp32, reductions fp32"' "$dir/chg.json"
check $? "resuming bf16 gathers' checkpoint with fp32 ones names the change"
grep -q '"key":[[:space:]]*"(gather and reduce dtypes)"' "$dir/${t}_res.json"
check $((1 - $?)) "resuming with the same dtypes names no dtype change"

# the int8 fallback: blocks of 32 do not fit the shards of 40 on 4 ranks
refused "argument '--gather-dtype int8': .*: int8 gather: the shard's last dim \\(40\\)" 4 \
  --steps 1 --gather-dtype int8 $E2
must_run fb 4 --steps $steps --gather-dtype int8 --int8-fallback bf16 $E2
grep -q '"wire_fallbacks":[[:space:]]*[1-9]' "$dir/fb.json"
check $? "int8 with a bf16 fallback: the JSON counts the weights that fell back"

# bf16 reductions: deterministic, not the fp32 sums
must_run r16 4 --steps $steps --reduce-dtype bf16 $E2
must_run r16d0 4 --steps $steps --reduce-dtype bf16 $E2 --prefetch-depth 0 &&
  same r16 r16d0 0 "bf16 reductions: prefetch off == depth 1, bitwise"
differ f32 r16 "bf16 reductions: the losses are not fp32's"

refused "--gather-dtype 'fp8': not a gather dtype \\(fp32\\|bf16\\|int8\\)" 2 --gather-dtype fp8
refused "--reduce-dtype 'int8': not a reduce dtype \\(fp32\\|bf16\\)" 2 --reduce-dtype int8
refused "argument '--int8-block 1': must be between" 2 --gather-dtype int8 --int8-block 1
refused "argument '--int8-fallback': needs --gather-dtype int8" 2 --int8-fallback bf16

summary
