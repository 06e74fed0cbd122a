#!/bin/sh
# The CPU path's numbers pinned: `smoe train --steps 5` of MODEL, one rank
# started without a launcher, with fp32 and bf16 gathers, must print the
# params sha256 that tests/data/train_digest.txt lists for this machine's
# OpenBLAS core (the hashes do not carry over between cores or BLAS
# builds; a core without lines is skipped, exit 77). It holds the model's
# refactors (the kernel table, the device path's glue) to bit for bit.
# usage: train_digest.sh SMOE DIGESTS MODEL
smoe=$1
digests=$2
model=$3
. "$(dirname "$0")/check_lib.sh"
for dtype in fp32 bf16; do
  if ! timeout 300 "$smoe" train --quiet --json --steps 5 --model "$model" \
       --gather-dtype "$dtype" >"$dir/run.json" 2>"$dir/run.err"; then
    bad "$model $dtype: the run failed: $(tail -3 "$dir/run.err")"
    continue
  fi
  core=$(sed -n 's/.*"blas_core":[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/run.json")
  got=$(sed -n 's/.*"params_sha256":[[:space:]]*"\([0-9a-f]*\)".*/\1/p' "$dir/run.json")
  want=$(awk -v c="$core" -v m="$model" -v d="$dtype" \
    '$1 == c && $2 == m && $3 == d { print $4 }' "$digests")
  if [ -z "$want" ]; then
    echo "skipped: no pinned sha256 for $model $dtype on OpenBLAS core '$core'"
    exit 77
  elif [ "$got" = "$want" ]; then
    ok "$model $dtype on $core: $got"
  else
    bad "$model $dtype on $core: params sha256 $got, pinned $want"
  fi
done
summary
