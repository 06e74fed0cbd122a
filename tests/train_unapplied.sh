#!/bin/sh
# smoe train says which MaxText keys it reads and does not apply, in the
# banner and in the JSON, each with its value and the reason; and a
# checkpoint resumed on another number of ranks lists the mesh axes and
# the global batch that change as it lists the config keys (old -> new).
# Two launches: 2 ranks save after step 1 (text, the banner), 1 rank
# resumes to step 2 (--json).
# usage: train_unapplied.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
cmp=
. "$(dirname "$0")/runs_lib.sh"

KEYS="num_moe_token_chunks=2 remat_policy=minimal sparse_matmul=false megablox=false"
KEYS="$KEYS attention=flash decoder_layer_input=offload use_iota_embed=true"
L2="learning_rate_schedule_steps=2"

# the banner: one line per key under its heading
# shellcheck disable=SC2086
timeout 180 "$mpiexec" -n 2 "$smoe" train --steps 1 $L2 $KEYS --checkpoint-dir "$dir/ck" \
  >"$dir/a.out" 2>"$dir/a.err"
check $? "2 ranks with the keys set run (and save step 1)"
grep -q '^not applied by smoe train:$' "$dir/a.out"
check $? "the banner's heading"
for kv in $KEYS; do
  line="  ${kv%%=*}: ${kv#*=}: "
  n=$(grep -c "^$line" "$dir/a.out")
  [ "$n" -eq 1 ] && [ "$(grep "^$line" "$dir/a.out" | wc -c)" -gt $((${#line} + 40)) ]
  check $? "the banner lists ${kv%%=*} once, with a reason"
done

# the JSON of the run resumed on one rank
# shellcheck disable=SC2086
timeout 180 "$mpiexec" -n 1 "$smoe" train --quiet --json --steps 2 $L2 $KEYS \
  --checkpoint-dir "$dir/ck" --resume >"$dir/b.json" 2>"$dir/b.err"
check $? "the run resumed on 1 rank"
tr -d '\n\t' <"$dir/b.json" >"$dir/b.flat"
for kv in $KEYS; do
  grep -q "{\"key\":\"${kv%%=*}\",\"value\":\"${kv#*=}\",\"reason\":\"[^\"]\{40,\}\"}" "$dir/b.flat"
  check $? "the JSON's not_applied lists ${kv%%=*} with a reason"
done
n=$(grep -o '"not_applied":\[[^]]*\]' "$dir/b.flat" | grep -o '"key":' | wc -l)
[ "$n" -eq 7 ]
check $? "not_applied holds those 7 keys (it holds $n)"
grep -q '{"key":"ici_fsdp_parallelism (resolved)","checkpoint":"2","now":"1"}' "$dir/b.flat"
check $? "config_changes: the mesh's fsdp 2 -> 1"
gb='{"key":"global batch (per_device_batch_size x ranks)",'
gb=$gb'"checkpoint":"8 (4 per rank x 2 ranks)","now":"4 (4 per rank x 1 rank)"}'
grep -qF "$gb" "$dir/b.flat"
check $? "config_changes: the global batch 8 -> 4"
summary
