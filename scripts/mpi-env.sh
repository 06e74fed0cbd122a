# Sourced by every script that starts MPI jobs (scripts/, bench/): Open MPI
# run as root, more ranks than cores on one host, one BLAS thread per rank.
# The test suite's copy of these settings is SMOE_MPI_ENV (tests/CMakeLists.txt).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=1
