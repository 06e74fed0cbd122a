#!/bin/sh
# The CLI's JSON against the golden dumps: smoe plan --json for two golden
# configurations (from the built-in enumeration and from --params).
# usage: plan_json.sh SMOE CHECKER DATA_DIR
smoe=$1
check=$2
gold=$3/maxtext/sharding_info/deepseek2-16b
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail=0
run() { # NAMED_DIR ARGS...
  dir=$1
  shift
  if "$smoe" plan --json "$@" >"$out" && "$check" "$out" "$dir/named_shardings.json"; then
    :
  else
    fail=1
  fi
}
run "$gold/v6e-16/slice_1/rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=4" \
  --model deepseek2-16b --devices 16 ici_fsdp_parallelism=-1 ici_expert_parallelism=4
run "$gold/tpu7x-8/slice_1/rule_ep-as-cp_ici_fsdp_parallelism=-1_ici_expert_parallelism=2" \
  --model deepseek2-16b --rules ep-as-cp --devices 8 ici_fsdp_parallelism=-1 \
  ici_expert_parallelism=2 \
  --params "$gold/tpu7x-8/slice_1/rule_ep-as-cp_ici_fsdp_parallelism=-1_ici_expert_parallelism=2/logical_shardings.json"
exit $fail
