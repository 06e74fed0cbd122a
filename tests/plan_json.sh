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
# --gather-dtype: the entries stay the golden ones; step_gather_bytes_recv
# (co-axis and legacy) halves for bf16 and is a quarter plus one 4-byte
# scale per 32 elements for int8, hand-computed from the fp32 figures
cfg="--model deepseek2-16b --devices 16 ici_fsdp_parallelism=-1 ici_expert_parallelism=4"
gdir="$gold/v6e-16/slice_1/rule_default_ici_fsdp_parallelism=-1_ici_expert_parallelism=4"
run "$gdir" $cfg --gather-dtype bf16
step_bytes() { # ARGS...: the step_gather_bytes_recv values, one a line
  "$smoe" plan --json "$@" | sed -n 's/.*"step_gather_bytes_recv":[[:space:]]*\([0-9]*\).*/\1/p'
}
# shellcheck disable=SC2086
f=$(step_bytes $cfg)
# shellcheck disable=SC2086
b=$(step_bytes $cfg --gather-dtype bf16)
# shellcheck disable=SC2086
q=$(step_bytes $cfg --gather-dtype int8)
# shellcheck disable=SC2086
q64=$(step_bytes $cfg --gather-dtype int8 --int8-block 64)
set -- $f
f1=$1 f2=$2
want_b="$((f1 / 2)) $((f2 / 2))"
want_q="$((f1 / 4 / 32 * 36)) $((f2 / 4 / 32 * 36))"
want_q64="$((f1 / 4 / 64 * 68)) $((f2 / 4 / 64 * 68))"
check_eq() { # WHAT GOT WANT
  if [ "$2" = "$3" ] && [ -n "$3" ]; then
    echo "ok: $1: $2"
  else
    echo "FAIL: $1: step_gather_bytes_recv $2, expected $3 (fp32: $f1 $f2)" >&2
    fail=1
  fi
}
check_eq "bf16 halves" "$(echo $b)" "$want_b"
check_eq "int8 quarters plus scales" "$(echo $q)" "$want_q"
check_eq "int8 block 64" "$(echo $q64)" "$want_q64"
if "$smoe" plan --json $cfg --gather-dtype int8 | grep -q '"gather_dtype":[[:space:]]*"int8"' &&
   "$smoe" plan --json $cfg | grep -q '"int8_block":[[:space:]]*null' &&
   "$smoe" plan $cfg --gather-dtype int8 | grep -q 'weight gathers move int8 in blocks of 32'; then
  echo "ok: gather_dtype and int8_block reported"
else
  echo "FAIL: gather_dtype / int8_block not reported" >&2
  fail=1
fi
# int8 blocks of 4096 fit no shard of this plan's 2048-wide dims: refused
# without a fallback (cli_errors), every weight in bf16 with one
# shellcheck disable=SC2086
qf=$(step_bytes $cfg --gather-dtype int8 --int8-block 4096 --int8-fallback bf16)
check_eq "int8 block 4096, bf16 fallback" "$(echo $qf)" "$want_b"
# shellcheck disable=SC2086
if "$smoe" plan --json $cfg --gather-dtype int8 --int8-block 4096 --int8-fallback bf16 |
     grep -q '"wire_reason":[[:space:]]*".*int8 gather: ' &&
   "$smoe" plan $cfg --gather-dtype int8 --int8-block 4096 --int8-fallback bf16 --why |
     grep -q '^    why bf16: .*int8 gather: '; then
  echo "ok: the fallback says why"
else
  echo "FAIL: gather_dtype / int8_block not reported" >&2
  fail=1
fi
exit $fail
