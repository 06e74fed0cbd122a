# Sourced by the benchmarks that run smoe on NP ranks of one mesh, after
# they set $top (the source tree) and $default_n: reads the caller's
# arguments [BUILD_DIR] [N] [NP] [KEY=VALUE ...] and sets build (the build
# directory), count (N, default $default_n), np (default 4) and over (the
# KEY=VALUE overrides; on 4 ranks with none, ici_expert_parallelism=2);
# exports the MPI settings (scripts/mpi-env.sh) and SMOE_CONFIG_DIR.
build=$(cd "${1:-$top/build}" && pwd)
count=${2:-$default_n}
np=${3:-4}
shift $(($# < 3 ? $# : 3))
over="$*"
[ -z "$over" ] && [ "$np" = 4 ] && over="ici_expert_parallelism=2"
. "$top/scripts/mpi-env.sh"
export SMOE_CONFIG_DIR="$build/configs"
