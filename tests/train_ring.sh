#!/bin/sh
# Ring of experts in smoe train (use_ring_of_experts=true): after 5 steps
# on 4 ranks with expert=2 and expert=4, the ring run equals the all-to-all
# run (every step's loss, lr and grad_norm within 1e-6
# relative; every parameter within 1e-5, cmp_runs) and the single-rank run
# as the all-to-all run does (1e-5); ring at prefetch depth 0 and 2 and
# with the legacy gathers is bitwise ring at depth 1; with one expert rank
# the key changes nothing (bitwise); the JSON names the exchange that ran.
# usage: train_ring.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3
steps=5

. "$(dirname "$0")/runs_lib.sh"

RING=use_ring_of_experts=true
# shellcheck disable=SC2086
must_run ref 1 --steps $steps per_device_batch_size=16
# shellcheck disable=SC2086
must_run refr 1 --steps $steps per_device_batch_size=16 $RING &&
  same ref refr 0 "one rank: the ring key changes nothing, bitwise"
for e in 2 4; do
  # shellcheck disable=SC2086
  must_run a$e 4 --steps $steps ici_expert_parallelism=$e || continue
  # shellcheck disable=SC2086
  must_run r$e 4 --steps $steps ici_expert_parallelism=$e $RING || continue
  verdict "expert=$e: ring vs all-to-all, every step's figures (1e-6)" \
    "$cmp" "$dir/a$e.json" - "$dir/r$e.json" - 1e-6
  same a$e r$e 1e-5 "expert=$e: ring vs all-to-all, parameters (1e-5)"
  same ref a$e 1e-5 "expert=$e: all-to-all vs single rank"
  same ref r$e 1e-5 "expert=$e: ring vs single rank"
  # shellcheck disable=SC2086
  must_run rl$e 4 --steps $steps ici_expert_parallelism=$e $RING --gather legacy &&
    same r$e rl$e 0 "expert=$e: ring, legacy == co-axis, bitwise"
done
# shellcheck disable=SC2086
must_run rd0 4 --steps $steps ici_expert_parallelism=2 $RING --prefetch-depth 0 &&
  same r2 rd0 0 "expert=2: ring, prefetch off == depth 1, bitwise"
# shellcheck disable=SC2086
must_run rd2 4 --steps $steps ici_expert_parallelism=2 $RING --prefetch-depth 2 &&
  same r2 rd2 0 "expert=2: ring, depth 2 == depth 1, bitwise"

# the JSON says which exchange ran
exchange() { # NAME WHAT
  tr -d '\n\t' <"$dir/$1.json" | grep -q "\"expert_exchange\":\"$2\""
  check $? "$1: expert_exchange \"$2\""
}
exchange r2 "ring (all-gather, reduce-scatter)"
exchange a2 "all-to-all"
exchange refr "local (expert axis 1)"

# --compare-exchange: both trainings in one command, their losses within
# 1e-6 of each other, a row each (3 steps: 2 after the first)
out=$(timeout 300 "$mpiexec" -n 4 "$smoe" train --steps 3 --compare-exchange \
  ici_expert_parallelism=2 2>&1)
diff=$(printf '%s\n' "$out" | sed -n 's/^largest relative loss difference over the steps: //p')
printf '%s\n' "$out" | grep -q '^all-to-all  *2 ' && printf '%s\n' "$out" | grep -q '^ring  *2 ' &&
  awk -v d="$diff" 'BEGIN { exit !(d != "" && d + 0 <= 1e-6) }'
check $? "--compare-exchange: all-to-all and ring side by side, losses within $diff"
summary
