#!/bin/sh
# Checkpoints of smoe train: a resumed run is bitwise the uninterrupted
# one; a checkpoint resumes on another mesh (re-cut shards) within 1e-5 of
# it; a job killed while saving leaves the previous checkpoint complete;
# damaged files and mismatched runs are refused with one clear message.
# usage: train_checkpoint.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3

. "$(dirname "$0")/runs_lib.sh"

# The learning-rate schedule spans the full run's 6 steps in every run
# (learning_rate_schedule_steps -1 would be each run's own --steps, so the
# 3-step run would follow a shorter schedule, as MaxText's does when its
# `steps` changes).
L6="learning_rate_schedule_steps=6"
E2="ici_expert_parallelism=2 $L6"
must_run full 4 --steps 6 $E2

# save every step, keep two; then resume to the end: bitwise the same
must_run part 4 --steps 3 $E2 --checkpoint-dir "$dir/ck" --checkpoint-every 1 --checkpoint-keep 2
kept=$(ls "$dir/ck" | tr '\n' ' ')
[ "$kept" = "LATEST step_00000002 step_00000003 " ]
check $? "--checkpoint-keep 2 leaves: $kept"
cp -r "$dir/ck" "$dir/ck0"
must_run res 4 --steps 6 $E2 --checkpoint-dir "$dir/ck" --resume &&
  same full res 0 "resume at step 3 (fsdp=2 x expert=2) == uninterrupted, bitwise"
grep -q '"resumed_from"' "$dir/res.json"
check $? "the resumed run names its checkpoint"

# with MaxText's recipe on (warmup, clipping, eps_root, decay mask, the
# bias update, both auxiliary losses, a trained router bias): the schedule
# and the bias update depend on the step, resumed bitwise
R="$E2 warmup_steps_fraction=0.4 gradient_clipping_threshold=0.5 adam_eps_root=1e-10"
R="$R adamw_mask=[norm] routed_bias_update_rate=0.002 load_balance_loss_weight=0.01"
R="$R z_loss_multiplier=1e-3 override_model_config=true routed_score_func=sigmoid routed_bias=true"
must_run rfull 4 --steps 6 $R
must_run rpart 4 --steps 3 $R --checkpoint-dir "$dir/rck" &&
  must_run rres 4 --steps 6 $R --checkpoint-dir "$dir/rck" --resume &&
  same rfull rres 0 "recipe: resume at step 3 == uninterrupted, bitwise"

# the same checkpoint on other meshes: shards re-cut from the manifest
cp -r "$dir/ck0" "$dir/ck1"
must_run f4 4 --steps 6 $L6 --checkpoint-dir "$dir/ck1" --resume &&
  same full f4 1e-5 "fsdp=2 x expert=2 checkpoint resumed as fsdp=4"
cp -r "$dir/ck0" "$dir/ck2"
must_run one 1 --steps 6 $L6 per_device_batch_size=16 --checkpoint-dir "$dir/ck2" --resume &&
  same full one 1e-5 "fsdp=2 x expert=2 checkpoint resumed on a single rank"
cp -r "$dir/ck0" "$dir/ck3"
must_run e4 4 --steps 6 $L6 ici_expert_parallelism=4 --checkpoint-dir "$dir/ck3" --resume &&
  same full e4 1e-5 "fsdp=2 x expert=2 checkpoint resumed as expert=4"

# and the other way: written on fsdp=4, resumed on fsdp=2 x expert=2
must_run f4part 4 --steps 3 $L6 --checkpoint-dir "$dir/ck4" &&
  must_run f4res 4 --steps 6 $E2 --checkpoint-dir "$dir/ck4" --resume &&
  same full f4res 1e-5 "fsdp=4 checkpoint resumed as fsdp=2 x expert=2"

# killed while writing the step-4 checkpoint: step 2 stays the latest
SMOE_TEST_KILL_IN_SAVE=4 run dead 4 --steps 6 $E2 --checkpoint-dir "$dir/kd" --checkpoint-every 2
rc=$?
latest=$(cat "$dir/kd/LATEST" 2>/dev/null)
[ "$rc" -ne 0 ] && [ "$latest" = step_00000002 ] && [ ! -e "$dir/kd/step_00000004" ]
check $? "killed mid-save (exit $rc): LATEST is still $latest, no step_00000004"
must_run after 4 --steps 6 $E2 --checkpoint-dir "$dir/kd" --resume &&
  same full after 0 "resume after the killed save == uninterrupted, bitwise"

# damaged files
cp -r "$dir/ck0" "$dir/bad1"
printf 'X' | dd of="$dir/bad1/step_00000003/shard_00001.bin" bs=1 seek=5000 conv=notrunc 2>/dev/null
refused "$dir/bad1/step_00000003/shard_00001.bin: SHA-256 mismatch" 4 --steps 6 $E2 \
  --checkpoint-dir "$dir/bad1" --resume
cp -r "$dir/ck0" "$dir/bad2"
truncate -s 1000 "$dir/bad2/step_00000003/shard_00002.bin"
refused "$dir/bad2/step_00000003/shard_00002.bin: truncated or damaged shard: 1000 bytes" 4 \
  --steps 6 $E2 --checkpoint-dir "$dir/bad2" --resume
cp -r "$dir/ck0" "$dir/bad3"
truncate -s 700 "$dir/bad3/step_00000003/manifest.json"
refused "$dir/bad3/step_00000003/manifest.json:[0-9]+:[0-9]+: not valid JSON" 4 --steps 6 $E2 \
  --checkpoint-dir "$dir/bad3" --resume
cp -r "$dir/ck0" "$dir/bad4"
rm "$dir/bad4/step_00000003/shard_00003.bin"
refused "$dir/bad4/step_00000003/shard_00003.bin: cannot open the shard file" 1 --steps 6 \
  per_device_batch_size=16 --checkpoint-dir "$dir/bad4" --resume

# mismatched runs
refused "argument '--seed': the checkpoint .* was trained with --seed 1" 4 --steps 6 $E2 \
  --seed 2 --checkpoint-dir "$dir/ck0" --resume
refused "argument '--steps': the checkpoint .* is already at step 3" 4 --steps 3 $E2 \
  --checkpoint-dir "$dir/ck0" --resume
refused ".*manifest.json: weight decoder/.* has per-layer shape \[.*\] in the checkpoint but \[.*\] in this model" \
  4 --steps 6 $E2 base_emb_dim=64 override_model_config=true --checkpoint-dir "$dir/ck0" --resume
refused "argument '--resume': needs --checkpoint-dir DIR" 4 --resume
refused "$dir/full.json: is not a directory" 2 --steps 1 --checkpoint-dir "$dir/full.json"

# --resume with nothing to resume: a fresh start, said so
timeout 120 "$mpiexec" -n 2 "$smoe" train --steps 1 --checkpoint-dir "$dir/empty" --resume \
  >"$dir/out" 2>&1
rc=$?
[ "$rc" -eq 0 ] && grep -q "no checkpoint in $dir/empty: started from step 0" "$dir/out"
check $? "--resume on an empty directory starts from step 0 and says so"

summary
