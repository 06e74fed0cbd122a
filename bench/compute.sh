#!/bin/sh
# Model FLOP/s inside compute against the same run's single-core sgemm
# (n = 512), for the tiny model of the main job and a 512-wide one
# (build/bench/bench_compute: one rank's training step, forward + backward,
# interleaved round by round with the sgemm, timed by the thread's CPU time
# and by wall time; medians and quartiles over the rounds). REPS
# repetitions of each, alternating the two models, with the load before and
# after each. With BASE_BUILD (another build, e.g. of main), each
# repetition runs both builds on each model, the order swapped every other
# repetition, and the end prints the median and range over the repetitions
# of each build's CPU-time ratio, so both see the same load.
# usage: bench/compute.sh [BUILD_DIR] [REPS] [ROUNDS] [BASE_BUILD]
#        (defaults build 3 15, no base)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
reps=${2:-3}
rounds=${3:-15}
base=${4:-}
[ -n "$base" ] && base=$(cd "$base" && pwd)
export OPENBLAS_NUM_THREADS=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "== machine: $(lscpu | sed -n 's/^CPU(s): *//p') CPUs, $(lscpu | sed -n 's/^Model name: *//p')"
one() { # LABEL BUILD MODEL
  out=$("$2/bench/bench_compute" "$3" "$rounds")
  echo "[$1] $out"
  ratio=$(echo "$out" | sed -n 's/.*by CPU  time:.*ratio \([0-9.]*\) .*/\1/p')
  echo "$1 $3 $ratio" >>"$log"
}
r=1
while [ "$r" -le "$reps" ]; do
  echo "== repetition $r, load: $(uptime | sed 's/.*load/load/')"
  for model in tiny wide; do
    if [ -z "$base" ]; then
      one this "$build" "$model"
    elif [ $((r % 2)) -eq 1 ]; then
      one base "$base" "$model"
      one this "$build" "$model"
    else
      one this "$build" "$model"
      one base "$base" "$model"
    fi
  done
  r=$((r + 1))
done
echo "== load after: $(uptime | sed 's/.*load/load/')"
echo "== CPU-time ratio to the same process's sgemm(n=512), median [range] over $reps repetitions:"
for who in base this; do
  for model in tiny wide; do
    v=$(awk -v w="$who" -v m="$model" '$1 == w && $2 == m { print $3 }' "$log" | sort -n)
    [ -z "$v" ] && continue
    echo "$v" | awk -v w="$who" -v m="$model" '{ a[NR] = $1 } END {
      med = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
      printf "   %-4s %-4s %.3f [%.3f-%.3f]\n", w, m, med, a[1], a[NR] }'
  done
done
