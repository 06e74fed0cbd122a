#!/bin/sh
# Build smoe against MPICH (beside Open MPI; nothing is switched system-wide)
# and run the tests under MPICH's mpiexec: those whose labels match TIERS
# (a ctest label regex, e.g. mpi; default: every test).
# usage: scripts/test-mpich.sh [BUILD_DIR [TIERS]]   (default: build-mpich)
set -eu
cd "$(dirname "$0")/.."
./scripts/deps.sh mpich libmpich-dev
build=${1:-build-mpich}
tiers=${2:-.}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSMOE_WERROR=ON \
  -DMPI_C_COMPILER=mpicc.mpich -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich)" >/dev/null
cmake --build "$build"
. ./scripts/ctest-jobs.sh
cd "$build"
ctest --output-on-failure --timeout 600 -L "$tiers"
