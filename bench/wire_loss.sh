#!/bin/sh
# Loss curves of the default training run with compressed gathers: 50 steps
# of `smoe train` on NP ranks (default 4) with --gather-dtype fp32, bf16 and
# int8 (blocks of 8: the tiny model's shards of 40 hold no block of 32), and
# fp32 gathers with --reduce-dtype bf16; prints each step's loss and the
# relative difference to fp32, and the largest after step 5 per dtype.
# Figures, not a test (the issue's bounds: bf16 2%, int8 5%).
# usage: bench/wire_loss.sh [SMOE] [NP] [STEPS]
smoe=${1:-build/smoe}
np=${2:-4}
steps=${3:-50}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
. "$(dirname "$0")/../scripts/mpi-env.sh"
run() { # NAME ARGS...
  name=$1
  shift
  mpirun -n "$np" "$smoe" train --quiet --json --steps "$steps" "$@" >"$dir/$name.json" ||
    { echo "wire_loss: the $name run failed" >&2; exit 1; }
  grep '"loss"' "$dir/$name.json" | tr -dc '0-9.e\n-' >"$dir/$name.loss"
}
run fp32
run bf16 --gather-dtype bf16
run int8 --gather-dtype int8 --int8-block 8
run rbf16 --reduce-dtype bf16
paste "$dir/fp32.loss" "$dir/bf16.loss" "$dir/int8.loss" "$dir/rbf16.loss" | awk '
  function rel(a, b) { d = (a - b) / b; return d < 0 ? -d : d }
  BEGIN { printf "%5s %10s %10s %9s %10s %9s %10s %9s\n", "step", "fp32", "bf16", "rel",
          "int8/8", "rel", "reduce16", "rel" }
  { s = NR; b = rel($2, $1); q = rel($3, $1); r = rel($4, $1)
    printf "%5d %10.5f %10.5f %9.2e %10.5f %9.2e %10.5f %9.2e\n", s, $1, $2, b, $3, q, $4, r
    if (s > 5) { if (b > mb) mb = b; if (q > mq) mq = q; if (r > mr) mr = r } }
  END { if (NR <= 5) { print "no step after step 5: run more steps for the comparison"; exit 1 }
        printf "largest relative difference after step 5: bf16 %.2e, int8 (block 8) %.2e, " \
        "bf16 reductions %.2e\n", mb, mq, mr }'
