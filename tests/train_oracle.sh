#!/bin/sh
# Numerical oracle of smoe train over MPI: after 5 steps, losses and every
# parameter of sharded runs equal the single-rank run (relative 1e-5, see
# cmp_runs), and runs that differ only in schedule are bitwise identical.
# Each MPI runtime path runs here once: every mesh shape (fsdp=4,
# fsdp=2 x expert=2, expert=4), prefetch depths 0 and 2, legacy gathers,
# the shared queue and the progress thread, the latter paired with a depth
# so that one launch covers two paths; HSDP (--slices 2,
# dcn_data_parallelism=2) and two-level gathers (dcn_fsdp_parallelism=2). The whole matrix of meshes x
# schedules (and 2 ranks, ep-as-dp) runs in process in test_vrank, which
# checks each path alone.
# usage: train_oracle.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3
steps=5

. "$(dirname "$0")/runs_lib.sh"

# the single-rank run sees the whole global batch (4 ranks x 4 sequences)
must_run ref 1 --steps $steps per_device_batch_size=16
must_run fsdp4 4 --steps $steps ici_fsdp_parallelism=4 && same ref fsdp4 1e-5 "fsdp=4 vs single rank"
must_run f2e2 4 --steps $steps ici_expert_parallelism=2 && same ref f2e2 1e-5 "fsdp=2 x expert=2 vs single rank"
must_run e4 4 --steps $steps ici_expert_parallelism=4 && same ref e4 1e-5 "expert=4 vs single rank"
must_run d0 4 --steps $steps ici_expert_parallelism=2 --prefetch-depth 0 --shared-queue &&
  same f2e2 d0 0 "prefetch off, shared queue == depth 1, dedicated, bitwise"
must_run d2 4 --steps $steps ici_expert_parallelism=2 --prefetch-depth 2 --progress-thread &&
  same f2e2 d2 0 "depth 2, progress thread == depth 1, polling, bitwise"
must_run leg 4 --steps $steps ici_expert_parallelism=2 --gather legacy && same f2e2 leg 0 "legacy == co-axis, bitwise"
# HSDP: 2 slices of 2 consecutive ranks (dcn_data_parallelism=2), fsdp=2
# within each, the weights replicated across them; on one host every byte
# stays within it (train_netns puts a slice on each of two hosts)
if must_run hsdp 4 --steps $steps --slices 2 dcn_data_parallelism=2; then
  same ref hsdp 1e-5 "HSDP (2 slices x fsdp=2) vs single rank"
  grep -q '"slices":[[:space:]]*"2 slices on 1 host"' "$dir/hsdp.json" &&
    ! grep '"link_bytes"' "$dir/hsdp.json" | grep -vq ':[[:space:]]*0,' &&
    grep '"host_bytes"' "$dir/hsdp.json" | grep -q ':[[:space:]]*[1-9]'
  check $? "HSDP on one host: 2 slices on 1 host, every step's bytes within it"
fi
# two-level gathers and reductions: fsdp=4 as 2 slices of 2
# (dcn_fsdp_parallelism=2), each gather across the slices then within, each
# reduce-scatter within then across; other schedules bitwise the same
T="--slices 2 dcn_fsdp_parallelism=2"
must_run two 4 --steps $steps $T && same ref two 1e-5 "two levels (fsdp 2 slices x 2) vs single rank"
must_run two0 4 --steps $steps $T --prefetch-depth 0 --shared-queue --gather legacy &&
  same two two0 0 "two levels: prefetch off, shared queue, legacy == depth 1, bitwise"

# MaxText's recipe with every feature on: warmup then cosine, clipping that
# binds, eps_root and a weight-decay mask, the aux-loss-free bias update,
# the load-balance loss and the z-loss; DeepSeek-V3's router (sigmoid,
# bias for selection only) and YaRN (interleaved, output scaled) on a
# small deepseek3 model; then the raw-logit router with a trained bias and
# RoPE halves on the tiny model
R="warmup_steps_fraction=0.4 learning_rate_schedule_steps=8 gradient_clipping_threshold=0.5"
R="$R adam_eps_root=1e-10 adamw_mask=[norm,bias] routed_bias_update_rate=0.002"
R="$R load_balance_loss_weight=0.01 z_loss_multiplier=1e-3"
DS3="--model deepseek3-tiny override_model_config=true base_num_decoder_layers=4"
DS3="$DS3 first_num_dense_layers=1 vocab_size=256 rope_attention_scaling=true"
must_run rref 1 --steps $steps $DS3 $R per_device_batch_size=16
must_run rf2e2 4 --steps $steps $DS3 $R ici_expert_parallelism=2 && same rref rf2e2 1e-5 "recipe (deepseek3): fsdp=2 x expert=2 vs single rank"
must_run re4 4 --steps $steps $DS3 $R ici_expert_parallelism=4 && same rref re4 1e-5 "recipe (deepseek3): expert=4 vs single rank"
must_run rd0 4 --steps $steps $DS3 $R ici_expert_parallelism=2 --prefetch-depth 0 --shared-queue &&
  same rf2e2 rd0 0 "recipe: prefetch off, shared queue == depth 1, bitwise"
must_run rd2 4 --steps $steps $DS3 $R ici_expert_parallelism=2 --prefetch-depth 2 --gather legacy &&
  same rf2e2 rd2 0 "recipe: depth 2, legacy == depth 1, co-axis, bitwise"
RAW="override_model_config=true routed_score_func=\"\" routed_bias=true"
must_run wref 1 --steps $steps $R $RAW per_device_batch_size=16
must_run wf2e2 4 --steps $steps $R $RAW ici_expert_parallelism=2 && same wref wf2e2 1e-5 "recipe (raw router, bias in the weights): fsdp=2 x expert=2 vs single rank"

# the recipe is visible: warmup (lr 0 first), clipping binds, both losses
recipe_seen() { # NAME
  j="$dir/$1.json"
  lr0=$(grep -m1 '"lr"' "$j" | tr -dc '0-9.e-')
  gn=$(grep -m1 '"grad_norm"' "$j" | tr -dc '0-9.e-')
  aux=$(grep -m1 '"aux_loss"' "$j" | tr -dc '0-9.e-')
  zl=$(grep -m1 '"z_loss"' "$j" | tr -dc '0-9.e-')
  if awk "BEGIN { exit !($lr0 == 0 && $gn > 0.5 && $aux > 0 && $zl > 0) }"; then
    pass=$((pass + 1))
    echo "ok: $1: first lr $lr0, grad_norm $gn (clipped to 0.5), aux_loss $aux, z_loss $zl"
  else
    fail=$((fail + 1))
    echo "FAIL: $1: first lr $lr0, grad_norm $gn, aux_loss $aux, z_loss $zl" >&2
  fi
}
recipe_seen rf2e2
recipe_seen wf2e2

# peak gathered-buffer bytes within (depth + 1) layers forward and
# (depth + 2) backward
bound() { # NAME DEPTH
  j="$dir/$1.json"
  layer=$(grep '"layer_gathered_bytes"' "$j" | tr -dc '0-9')
  fwd=$(grep '"peak_gathered_fwd_bytes"' "$j" | tr -dc '0-9')
  bwd=$(grep '"peak_gathered_bwd_bytes"' "$j" | tr -dc '0-9')
  if [ -n "$layer" ] && [ "$layer" -gt 0 ] && [ "$fwd" -le $((($2 + 1) * layer)) ] &&
     [ "$bwd" -le $((($2 + 2) * layer)) ] && [ "$bwd" -gt 0 ]; then
    pass=$((pass + 1))
    echo "ok: depth $2: peak gathered forward $fwd, backward $bwd bytes (layer $layer)"
  else
    fail=$((fail + 1))
    echo "FAIL: depth $2: peak gathered forward $fwd, backward $bwd bytes (layer $layer)" >&2
  fi
}
bound d0 0
bound f2e2 1
bound d2 2

# the loss must fall
first=$(grep -m1 '"loss"' "$dir/f2e2.json" | tr -dc '0-9.')
last=$(grep '"loss"' "$dir/f2e2.json" | tail -1 | tr -dc '0-9.')
if awk "BEGIN { exit !($last < $first - 0.5) }"; then
  pass=$((pass + 1))
  echo "ok: loss falls from $first to $last in $steps steps"
else
  fail=$((fail + 1))
  echo "FAIL: loss $first -> $last does not fall" >&2
fi
summary
