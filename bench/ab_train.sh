#!/bin/sh
# Builds' training runs taking turns, round by round, on the same command:
# each run's summary row (the median step and exposed gather over its
# steps, with their quartiles), the builds labelled A, B, C... in the
# order given. For a runtime change measured against the commit before
# it, on a quiet machine.
# usage: bench/ab_train.sh ROUNDS NP SMOE... -- TRAIN_ARGS...
set -eu
usage() { echo "usage: $0 ROUNDS NP SMOE... -- TRAIN_ARGS..." >&2; exit 2; }
[ $# -ge 4 ] || usage
rounds=$1 np=$2
shift 2
bins=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  [ -x "$1" ] || { echo "$0: '$1' is not an executable" >&2; exit 2; }
  bins="$bins $1"
  shift
done
[ $# -gt 0 ] && [ -n "$bins" ] || usage
shift
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/mpi-env.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "command: mpirun -np $np smoe train $*"
i=0
for bin in $bins; do
  echo "$(printf "\\$(printf %o $((65 + i)))"): $bin"
  i=$((i + 1))
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | build | step ms [25th-75th] | exposed gather ms [25th-75th] |"
echo "|---|---|---|---|"
r=1
while [ "$r" -le "$rounds" ]; do
  i=0
  for bin in $bins; do
    label=$(printf "\\$(printf %o $((65 + i)))")
    i=$((i + 1))
    "$top/scripts/mpirun.sh" -np "$np" "$bin" train "$@" >"$out" 2>&1 ||
      { cat "$out" >&2; exit 1; }
    # the summary's row follows its header: NAME STEPS STEP [Q] AG [Q] ...
    awk -v r="$r" -v w="$label" '
      /^schedule +steps +step ms/ { getline; printf "| %s | %s | %s %s | %s %s |\n", r, w, $3, $4, $5, $6 }' "$out"
  done
  r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
