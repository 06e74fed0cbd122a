# Sourced by the scripts that run the test suite: CTest runs tests twice as
# many at a time as there are cores. Most of an MPI test's wall time is
# spent waiting (launches, watchdog timeouts, the shaped links of the
# network-namespace hosts), which the other tests' compute fills; every
# test must pass on a loaded machine anyway. The suite's times at -j1 and
# -j4 on 2 cores: bench/results/2026-12-05-suite-time.md. An explicit
# CTEST_PARALLEL_LEVEL wins.
: "${CTEST_PARALLEL_LEVEL:=$((2 * $(nproc)))}"
export CTEST_PARALLEL_LEVEL
