#!/bin/sh
# Two smoe binaries' training runs taking turns, round by round, on the
# same command: each run's summary row (the median step and exposed gather
# over its steps, with their quartiles). For a runtime change measured
# against the commit before it, on a quiet machine.
# usage: bench/ab_train.sh A_SMOE B_SMOE ROUNDS NP TRAIN_ARGS...
set -eu
[ $# -ge 4 ] || { echo "usage: $0 A_SMOE B_SMOE ROUNDS NP TRAIN_ARGS..." >&2; exit 2; }
a=$1 b=$2 rounds=$3 np=$4
shift 4
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/mpi-env.sh"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
echo "command: mpirun -np $np smoe train $*"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| round | binary | step ms [25th-75th] | exposed gather ms [25th-75th] |"
echo "|---|---|---|---|"
r=1
while [ "$r" -le "$rounds" ]; do
  for which in A B; do
    bin=$a
    [ "$which" = B ] && bin=$b
    "$top/scripts/mpirun.sh" -np "$np" "$bin" train "$@" >"$out" 2>&1 ||
      { cat "$out" >&2; exit 1; }
    # the summary's row follows its header: NAME STEPS STEP [Q] AG [Q] ...
    awk -v r="$r" -v w="$which" '
      /^schedule +steps +step ms/ { getline; printf "| %s | %s | %s %s | %s %s |\n", r, w, $3, $4, $5, $6 }' "$out"
  done
  r=$((r + 1))
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
