#!/bin/sh
# Fuzz smoe's hostile-input entry points with libFuzzer (+ ASan + UBSan):
# the YAML loader, the key=value overrides, the logical_axis_rules ->
# PartitionSpec -> gather-plan pipeline, the --params JSON reader and the
# checkpoint manifest reader (fuzz/targets.c, fuzz/target_manifest.c),
# smoe sim's hardware profiles and scenarios (fuzz/targets_sim.c), the
# prefetch schedule files of smoe train --schedule (fuzz/target_schedule.c)
# and the --trace files that smoe sim --profile reads (fuzz/target_trace.c). Each
# target runs for SECONDS (one target per core at a time) from its seed corpus
# (fuzz/corpus/<target>, plus what earlier runs found in
# build-fuzz/corpus/<target>) with the dictionary fuzz/<target>.dict. Exits non-zero if any target crashed, leaked,
# hit undefined behaviour or timed out, and prints the reproducer path; replay
# it with build-fuzz/fuzz/fuzz_<target> FILE, fix the bug, then copy the file
# to tests/data/fuzz-regress/<target>/ (the fuzz_regress test replays it).
# usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#        (default 60 s each; targets yaml overrides rules params_json manifest hwfile scenario
#        schedule trace)
set -eu
cd "$(dirname "$0")/.."
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-yaml overrides rules params_json manifest hwfile scenario schedule trace}
./scripts/deps.sh clang libclang-rt-14-dev

build=build-fuzz
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
flags="$flags -fno-omit-frame-pointer -g -O1"
cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Fuzz \
      -DCMAKE_C_FLAGS="$flags" -DSMOE_FUZZ=ON -DSMOE_WERROR=ON >/dev/null
cmake --build "$build" --target smoe_fuzzers

export SMOE_CONFIG_DIR="$PWD/$build/configs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# TARGET: fuzz it for $secs s; its report (and reproducers) in
# $build/fuzz_TARGET.{log,out}; exit 1 when it found a problem
fuzz_one() {
  t=$1
  rm -rf "$build/crashes/$t" # reproducers of an earlier run: copy them away first
  mkdir -p "$build/corpus/$t" "$build/crashes/$t"
  log="$build/fuzz_$t.log"
  rc=0
  dict=""
  [ -f "fuzz/$t.dict" ] && dict="-dict=fuzz/$t.dict"
  "$build/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t/" $dict \
      "$build/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -1 || true)
  echo "fuzz_$t: ${execs:-?} runs, $cov, corpus $(ls "$build/corpus/$t" | wc -l) files, exit $rc"
  found=$(ls "$build/crashes/$t" 2>/dev/null || true)
  if [ "$rc" -ne 0 ] || [ -n "$found" ]; then
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error|fuzz invariant)' "$log" | head -5
    for f in $found; do
      echo "fuzz_$t: reproducer $build/crashes/$t/$f"
    done
    echo "fuzz_$t: log $log"
    return 1
  fi
}

# the targets run $jobs at a time (one per core: each is one process),
# each for its full $secs; reports are printed in target order
jobs=$(nproc 2>/dev/null || echo 1)
echo "fuzzing $targets: ${secs}s each, $jobs at a time"
failed=""
set -- $targets
while [ $# -gt 0 ]; do
  batch=""
  i=0
  while [ $# -gt 0 ] && [ "$i" -lt "$jobs" ]; do
    (r=0; fuzz_one "$1" >"$build/fuzz_$1.out" 2>&1 || r=$?; echo $r >"$build/fuzz_$1.rc") &
    batch="$batch $1"
    i=$((i + 1))
    shift
  done
  wait
  for t in $batch; do
    if [ "$(cat "$build/fuzz_$t.rc")" = 0 ]; then
      cat "$build/fuzz_$t.out"
    else
      cat "$build/fuzz_$t.out" >&2
      failed="$failed $t"
    fi
  done
done
if [ -n "$failed" ]; then
  echo "fuzzing found problems in:$failed" >&2
  exit 1
fi
echo "fuzzing: no crashes"
