#!/bin/sh
# Build smoe with AddressSanitizer + UndefinedBehaviorSanitizer
# (-DSMOE_SANITIZE=ON) and run the whole test suite under them. Any report
# fails the run: UBSan halts on the first error; ASan always does.
# Single-process tests keep LeakSanitizer on; MPI tests (CTest label mpi)
# run with detect_leaks=0, because Open MPI's own allocations at exit show
# up as leaks that no suppression file covers reliably.
# allocator_may_return_null=1: an absurd allocation (a hostile config asking
# for terabytes) returns NULL as in a normal build, so smoe's own "out of
# memory" path is what gets tested, not ASan's allocation-size abort.
# TIERS (a ctest label regex, e.g. 'unit|mpi|sanitize') picks the tests;
# default: every test.
# usage: scripts/test-sanitize.sh [BUILD_DIR [TIERS]]   (default: build-asan)
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
build=${1:-build-asan}
tiers=${2:-.}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_SANITIZE=ON \
      -DSMOE_WERROR=ON >/dev/null
cmake --build "$build"
. ./scripts/ctest-jobs.sh
cd "$build"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
rc=0
echo "== single-process tests (LeakSanitizer on)"
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 ctest --output-on-failure --timeout 900 -L "$tiers" -LE mpi || rc=1
echo "== MPI tests (detect_leaks=0)"
if printf 'mpi\n' | grep -Eq "$tiers"; then
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 ctest --output-on-failure --timeout 900 -L mpi || rc=1
fi
exit $rc
