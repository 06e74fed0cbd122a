#!/bin/sh
# Gathers in each dtype, step by step: with fp32, bf16 and int8 (blocks of
# 8) gathers every training step of a sharded run, started from the
# single-rank run's state, equals the single-rank run's step within 1e-5
# relative, on each mesh of train_wire (fsdp=4, fsdp=2 x expert=2,
# expert=4): the loss, lr and grad_norm of the step (cmp_runs), and every
# parameter tensor after it and every tensor of the AdamW moments after
# it, the gradients' history (cmp_ckpt on the two runs' checkpoints). The
# sharded run resumes from the single-rank checkpoint after step k
# (re-cut for its mesh) and runs step k + 1, step 1 on every mesh and
# each later step on one mesh in turn; the reference is one
# single-rank run of 5 steps, never resumed, that saves its state after
# every step: its step k + 1 and its checkpoint after it (one run, not one
# per k: a run's state after k + 1 steps does not depend on how many
# steps follow, the learning-rate schedule being the 5-step run's in
# every run).
#
# Why step by step (train_wire compares whole 5-step trajectories at
# 5e-5, train_oracle fp32's at 1e-5): two runs that differ only in fp32
# reduction order drift apart, and the drift is not an implementation
# error. Measured (sharded vs single rank, worst parameter tensor in
# 2-norm, worst mesh; after steps 1, 2, 3, 4, 5):
#   fp32  4.7e-6 after step 1, then flat (loss within 5.3e-8)
#   bf16  1.8e-6, 2.4e-6, 3.2e-6, 3.6e-6, 8.5e-6 (loss 1.3e-5 at step 5)
#   int8  1.2e-5, 1.2e-5, 1.2e-5, 1.5e-5, 2.0e-5 (loss within 4.3e-6)
# Two mechanisms. (1) AdamW's first step moves each element by
# lr * g / (|g| + eps) (the moments bias-corrected to g and g^2), so an
# element whose gradient is near eps = 1e-8 turns the gradient's
# reduction-order noise into a visible fraction of lr: in int8's
# fsdp=2 x expert=2 run, element (24, 21) of the dense layer's wq_a has
# |g| = 2.1e-8 on one rank and 2.4e-8 sharded and moves by 0.681 vs 0.703
# of lr (6.5e-5), alone 1.2e-5 of that tensor's norm; fp32's 4.7e-6 is the
# same effect (the MoE gate). (2) From then on the master weights differ
# by 1e-8 .. 1e-6, and the few that straddle a rounding boundary gather
# to different values: in fsdp=2 x expert=2 after step 1, 5 of 930176
# weights round to another bf16 (after step 4: 1465, most in the routed
# experts) and no int8 value moves (1031 of 116272 block scales differ
# in the last bits); after step 4, about 160 int8 values are one step
# (their block's max / 127) apart. The next steps carry these into the
# loss: fsdp=4's state after step 4 and the single rank's, each resumed
# on one rank for step 5, give losses 1.3e-5 apart with bf16 gathers and
# 2.0e-7 apart with fp32 gathers (bf16's step-5 jump is the rounding).
# The gradients drift further: on fsdp=4 the moments after 5 steps differ
# by 2.9e-6 with fp32 gathers but 1.0e-3 (int8) and 6.4e-3 (bf16, the MoE
# gate) with compressed ones, while AdamW keeps the parameters at 1e-5.
# From the same state one step differs by far less: measured from the
# single-rank checkpoints after steps 1..4, worst parameter tensor 3.5e-8
# (fp32), 2.6e-8 (bf16) and 6.1e-8 (int8) for step 2, below 2.4e-8 for
# steps 3..5, every loss within 4.7e-9, every moment within 1.5e-6
# (steps 2..5). Step 1 starts from the same state by construction (the
# initialisation is mesh-independent); its moments (mu = (1 - b1) g,
# nu = (1 - b2) g^2: the gradient) are within 2.4e-6 with the default
# recipe, but (1) makes its parameters an amplifier of gradient noise with
# the default eps, so they are checked with adam_eps=1e-6 (measured: 1.2e-6
# worst tensor). eps acts only in the update: step 1's loss, lr, grad_norm
# and moments with adam_eps=1e-6 are bitwise the default run's (the
# moments checked here; loss within 3.3e-9, grad_norm 8.2e-8).
# The oracle can fail: one step from the same checkpoint with fp32 gathers
# instead of bf16, with int8 blocks of 4 instead of 8, or with bf16
# gradient reductions (one bf16 rounding of each gradient sum) is outside
# 1e-5 (measured: 5.2e-4, 5.3e-4 and 1.8e-5 in the worst tensor).
# usage: train_wire_step.sh MPIEXEC SMOE CMP_RUNS CMP_CKPT
mpiexec=$1
smoe=$2
cmp=$3
cmpck=$4
steps=5

. "$(dirname "$0")/runs_lib.sh"

# every run: the learning-rate schedule of the 5-step run
L="learning_rate_schedule_steps=$steps"
TOL=1e-5
MESHES="f4:ici_fsdp_parallelism=4 e2:ici_expert_parallelism=2 e4:ici_expert_parallelism=4"

# NAME K: a copy of the single-rank checkpoint after step K (the resumed
# run writes its own checkpoint into the copy); a failure is counted
ck_copy() {
  rm -rf "$dir/c_$1"
  mkdir "$dir/c_$1" && cp -r "$dir/ck_$t/$(printf 'step_%08d' "$2")" "$dir/c_$1/"
  r=$?
  [ "$r" -eq 0 ] || check $r "copy of the single-rank checkpoint after step $2"
  return $r
}

# NAME K: the run resumed from checkpoint K and ran one step, not more
one_step() {
  nsteps=$(grep -c '"loss"' "$dir/$1.json")
  grep -q '"resumed_from"' "$dir/$1.json" && [ "$nsteps" -eq 1 ]
  check $? "$1: resumed after step $2, ran $nsteps step(s)"
}

# NAME K MESH-KEY WIRE...: the sharded run resumed from the single-rank
# checkpoint after step K for step K + 1 (4 ranks); its checkpoint after
# step K + 1 is left in $dir/c_NAME (gone: drop NAME)
resumed() {
  name=$1
  k=$2
  mk=$3
  shift 3
  ck_copy "$name" "$k" &&
    must_run "$name" 4 --steps $((k + 1)) "$@" $L "$mk" --checkpoint-dir "$dir/c_$name" --resume &&
    one_step "$name" "$k"
}
drop() { rm -rf "$dir/c_$1"; }

# A-DIR B-DIR TOL WHAT STATE...: cmp_ckpt of two checkpoints
same_ck() {
  a=$1
  b=$2
  tol=$3
  what=$4
  shift 4
  verdict "$what" "$cmpck" "$a" "$b" "$tol" "$@"
}
MOM="adamw_mu adamw_nu"

# REF-DIR NAME WHAT: the oracle can fail (the parameters after the step,
# cmp_ckpt, outside TOL)
differs() {
  "$cmpck" "$1" "$dir/c_$2/$(basename "$1")" $TOL params >"$dir/cmp.out" 2>&1
  rc=$?
  [ "$rc" -ne 0 ] && grep -q worst "$dir/cmp.out"
  check $? "$3: $(grep worst "$dir/cmp.out")"
}

E2="ici_expert_parallelism=2"
for w in "fp32" "bf16" "int8 --int8-block 8"; do
  t=$(echo "$w" | cut -d' ' -f1)
  # shellcheck disable=SC2086
  G="--gather-dtype $w"
  # the single-rank run, its state saved after every step (the reference:
  # no resume in it)
  must_run "${t}_r$steps" 1 --steps $steps $G $L per_device_batch_size=16 \
    --checkpoint-dir "$dir/ck_$t" --checkpoint-every 1
  # step 1 from the initialisation (the eps of (1) above); its moments are
  # the gradient (mu = (1 - b1) g, nu = (1 - b2) g^2), which eps does not
  # touch: bitwise the default run's, and compared with them
  E6="adam_eps=1e-6"
  c1=$(printf 'step_%08d' 1)
  must_run "${t}_r1" 1 --steps 1 $G $L $E6 per_device_batch_size=16 --checkpoint-dir "$dir/ck1_$t"
  same_ck "$dir/ck_$t/$c1" "$dir/ck1_$t/$c1" 0 "$t: step 1's moments with adam_eps=1e-6 == default, bitwise" $MOM
  for m in $MESHES; do
    n=${m%%:*}
    must_run "${t}_${n}_1" 4 --steps 1 $G $L $E6 "${m#*:}" --checkpoint-dir "$dir/c_${t}_${n}_1" &&
      same "${t}_r1" "${t}_${n}_1" $TOL "$t: $n step 1 (adam_eps=1e-6) vs single rank" &&
      same_ck "$dir/ck_$t/$c1" "$dir/c_${t}_${n}_1/$c1" $TOL "$t: $n step 1's gradient moments" $MOM
    drop "${t}_${n}_1"
  done
  rm -rf "$dir/ck1_$t"
  # steps 2..5, each from the single-rank state after the step before: the
  # step's figures, parameters and moments; each step on one mesh, the
  # meshes in turn (step 2 on f4, 3 on e2, 4 on e4, 5 on f4), so that
  # every step and every mesh is checked (step 1 above on every mesh)
  for k in 1 2 3 4; do
    ck=$(printf 'step_%08d' $((k + 1)))
    # shellcheck disable=SC2086
    set -- $MESHES
    shift $(((k - 1) % 3))
    for m in $1; do
      n=${m%%:*}
      # shellcheck disable=SC2086
      resumed "${t}_${n}_$((k + 1))" $k "${m#*:}" $G &&
        verdict "$t: $n step $((k + 1)) from the single-rank state after step $k" \
          "$cmp" "$dir/${t}_r$steps.json" - "$dir/${t}_${n}_$((k + 1)).json" - $TOL &&
        same_ck "$dir/ck_$t/$ck" "$dir/c_${t}_${n}_$((k + 1))/$ck" $TOL \
          "$t: $n step $((k + 1))'s parameters and moments" params $MOM
      drop "${t}_${n}_$((k + 1))"
    done
  done
  # the oracle can fail: one step from the same state in a wrong wire
  case $t in
  bf16)
    resumed neg32 2 $E2 --gather-dtype fp32 &&
      differs "$dir/ck_$t/step_00000003" neg32 "fp32 gathers in bf16's step 3 are outside $TOL"
    drop neg32
    resumed negr16 2 $E2 --gather-dtype bf16 --reduce-dtype bf16 &&
      differs "$dir/ck_$t/step_00000003" negr16 "bf16 reductions in bf16's step 3 are outside $TOL"
    drop negr16
    ;;
  int8)
    resumed neg4 2 $E2 --gather-dtype int8 --int8-block 4 &&
      differs "$dir/ck_$t/step_00000003" neg4 "int8 blocks of 4 in step 3 of blocks of 8 are outside $TOL"
    drop neg4
    ;;
  esac
  rm -rf "$dir/ck_$t"
done

summary
