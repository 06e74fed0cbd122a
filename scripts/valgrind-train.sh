#!/bin/sh
# Run small smoe train jobs with every rank under valgrind's memcheck: no
# invalid read or write, no use of uninitialised memory, no bad syscall
# argument may come from smoe. scripts/valgrind.supp suppresses only the MPI
# stack's own noise (see the comments there); leak checking is off (Open
# MPI keeps its allocations until exit). Two runs, about 1.5 min on 2 cores:
#   4 ranks, fsdp=2 x expert=2, --compare (no-prefetch, prefetch, legacy:
#     co-axis and legacy gathers, the expert all-to-all, reduce-scatters);
#   2 ranks with --progress-thread, --trace, --dump-params and --json;
# and, single-process with leak checking, the fuzz seeds and regression
# inputs through the config, JSON and plan code (tests/fuzz_replay).
# The model is the bundled tiny one, cut to 1 x 32 tokens per rank (memcheck
# runs the BLAS kernels ~100x slower). Exits non-zero on any error.
# usage: scripts/valgrind-train.sh [BUILD_DIR]   (default: build-vg)
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh valgrind
build=${1:-build-vg}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target smoe fuzz_replay
logs="$build/valgrind"
rm -rf "$logs"
mkdir -p "$logs"

. scripts/mpi-env.sh
# one host: shared memory between ranks, the launcher on loopback only (other
# interfaces coming and going, e.g. tests' network namespaces, do not matter)
export OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo
vg="valgrind --error-exitcode=3 --leak-check=no --track-origins=yes --num-callers=30
    --suppressions=scripts/valgrind.supp --gen-suppressions=all"
small="--steps 2 --comm-timeout 0 per_device_batch_size=1 max_target_length=32"

rc=0
run() { # NAME NP ARGS...
  name=$1
  np=$2
  shift 2
  echo "== $name: mpirun -np $np valgrind smoe train $*"
  r=0
  mpirun -np "$np" $vg --log-file="$logs/$name.%p.log" "$build/smoe" train "$@" \
    >"$logs/$name.out" 2>"$logs/$name.err" || r=$?
  grep -h "ERROR SUMMARY" "$logs/$name".*.log | sed 's/^==[0-9]*== /   /'
  if [ "$r" -ne 0 ]; then
    echo "$name: exit $r (3 = valgrind found errors); logs in $logs/$name.*" >&2
    grep -v -e hwloc -e "^May be" -e "^and reloading" "$logs/$name.err" | tail -5 >&2
    rc=1
  fi
}
run compare 4 $small --compare ici_expert_parallelism=2
run outputs 2 $small --progress-thread --trace "$logs/trace.json" \
  --dump-params "$logs/params.bin" --json
echo "== fuzz_replay: fuzz seeds and regression inputs (leak check on)"
r=0
SMOE_CONFIG_DIR="$PWD/$build/configs" valgrind -q --error-exitcode=3 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect --log-file="$logs/replay.log" \
  "$build/tests/fuzz_replay" --all tests/data/fuzz-regress fuzz/corpus >"$logs/replay.out" || r=$?
tail -1 "$logs/replay.out"
if [ "$r" -ne 0 ] || [ -s "$logs/replay.log" ]; then
  echo "fuzz_replay: exit $r; see $logs/replay.log" >&2
  rc=1
fi
[ "$rc" -eq 0 ] && echo "valgrind: clean"
exit $rc
