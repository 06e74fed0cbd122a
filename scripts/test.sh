#!/bin/sh
# Build smoe with warnings as errors and run the whole test suite.
# usage: scripts/test.sh [BUILD_DIR]   (default: build)
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh
build=${1:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_WERROR=ON >/dev/null
cmake --build "$build"
. ./scripts/ctest-jobs.sh
cd "$build"
rc=0
ctest --output-on-failure --timeout 600 || rc=$?
# ctest shows a skipped test without its reason: print what each one said
log=Testing/Temporary/LastTest.log
if [ -f "$log" ] && grep -q '^skip' "$log"; then
  echo "skipped or partly skipped, and why:"
  grep '^skip' "$log" | sed 's/^/  /'
fi
exit "$rc"
