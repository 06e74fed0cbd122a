# Sourced by the benchmarks that run smoe on NP ranks of one mesh, after
# they set $top (the source tree) and $default_n: reads the caller's
# arguments [BUILD_DIR] [N] [NP] [KEY=VALUE ...] and sets build (the build
# directory), count (N, default $default_n), np (default 4) and over (the
# KEY=VALUE overrides; on 4 ranks with none, ici_expert_parallelism=2);
# exports the MPI settings (scripts/mpi-env.sh) and SMOE_CONFIG_DIR; sets
# bind, Open MPI's binding for every launch of the benchmark: each rank
# pinned to a core (several to one where they outnumber the cores), so the
# calibration and the training run in one placement. Unpinned, the
# scheduler puts a within-host gather's two ranks on one core or on two by
# chance, and the calibrated ici_bandwidth took one of two values 1.7x
# apart from one calibration to the next (8.6-9.1e9 and 5.2e9, quiet).
build=$(cd "${1:-$top/build}" && pwd)
count=${2:-$default_n}
np=${3:-4}
shift $(($# < 3 ? $# : 3))
over="$*"
[ -z "$over" ] && [ "$np" = 4 ] && over="ici_expert_parallelism=2"
. "$top/scripts/mpi-env.sh"
export SMOE_CONFIG_DIR="$build/configs"
bind="--bind-to core:overload-allowed"
