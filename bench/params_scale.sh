#!/bin/sh
# Benchmark: `smoe plan --params` on synthetic logical_shardings.json files
# of 10k and 100k entries, and the DeepSeek-V3 plan on 1024 devices, each
# command timed whole-process, the cases interleaved round by round so load
# on the machine hits them alike; prints the median of each and the
# 100k/10k ratio (linear reading: about 10).
# usage: params_scale.sh SMOE [SMOE_BEFORE] [ROUNDS]
#   SMOE_BEFORE: another build (e.g. of an older commit) whose DeepSeek-V3
#   plan is timed in the same rounds, for a before/after figure.
smoe=$1
before=${2:-}
rounds=${3:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

gen() { # N FILE: N entries, unscanned layers, two logical axes each
  awk -v n="$1" 'BEGIN {
    printf "{\n"
    for (i = 0; i < n; i++) {
      printf "  \".params/[\x27params\x27]/[\x27decoder\x27]/[\x27layers_%d\x27]/[\x27mlp\x27]/[\x27wi_0\x27]/[\x27kernel\x27]\": {\"partition_spec\": [\"embed\", \"mlp\"], \"shape\": [4096, 14336]}%s\n", i, i + 1 < n ? "," : ""
    }
    printf "}\n"
  }' >"$2"
}
gen 10000 "$dir/p10k.json"
gen 100000 "$dir/p100k.json"

ms() { # prints wall ms of the command, or "fail"
  t0=$(date +%s%N)
  if "$@" >/dev/null 2>"$dir/err"; then
    t1=$(date +%s%N)
    echo $(((t1 - t0) / 1000000))
  else
    echo fail
    sed 's/^/    /' "$dir/err" >&2
  fi
}
dsv3() { "$1" plan --model deepseek3-671b --devices 1024 ici_fsdp_parallelism=-1 \
  ici_expert_parallelism=8; }

: >"$dir/t"
r=0
while [ "$r" -lt "$rounds" ]; do
  echo "p10k $(ms "$smoe" plan --devices 16 --params "$dir/p10k.json")" >>"$dir/t"
  echo "p100k $(ms "$smoe" plan --devices 16 --params "$dir/p100k.json")" >>"$dir/t"
  echo "dsv3 $(ms dsv3 "$smoe")" >>"$dir/t"
  [ -n "$before" ] && echo "dsv3_before $(ms dsv3 "$before")" >>"$dir/t"
  r=$((r + 1))
done
med() { grep "^$1 " "$dir/t" | awk '{print $2}' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "n/a")}'; }
a=$(med p10k)
b=$(med p100k)
echo "rounds $rounds (median wall ms, interleaved)"
echo "plan --params, 10000 entries:   $a ms"
echo "plan --params, 100000 entries:  $b ms"
echo "ratio 100k/10k:                 $(awk -v a="$a" -v b="$b" 'BEGIN { if (a > 0) printf "%.1f", b / a; else print "n/a" }')"
echo "DeepSeek-V3 plan @1024:         $(med dsv3) ms"
[ -n "$before" ] && echo "DeepSeek-V3 plan @1024 before:  $(med dsv3_before) ms"
exit 0
