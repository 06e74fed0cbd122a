#!/bin/sh
# mpirun with the settings smoe's scripts use: Open MPI allowed to run as
# root, more ranks than cores on one host, one BLAS thread per rank
# (scripts/mpi-env.sh). MPICH's launcher ignores the Open MPI variables and
# passes the environment to its ranks, so the same line works under both.
# usage: scripts/mpirun.sh -np N build/smoe train ...
#        MPIRUN=mpiexec.mpich scripts/mpirun.sh -n N ...   (another launcher)
. "$(dirname "$0")/mpi-env.sh"
exec "${MPIRUN:-mpirun}" "$@"
