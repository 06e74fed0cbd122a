# shellcheck shell=sh disable=SC2034,SC2154 # set here for, and from, the scripts that source it
# What bench/hsdp.sh, bench/hsdp_trace.sh and bench/hsdp_calib_repeat.sh
# share (sourced; needs $top and $build): MPI's environment, the configs,
# a scratch $dir removed with the hosts at exit, the model's shape, the
# three layouts, smoe across the two network-namespace hosts, the
# calibration across them and the simulator's prediction of a layout.
. "$top/scripts/mpi-env.sh"
export SMOE_CONFIG_DIR="$build/configs"
dir=$(mktemp -d)
cleanup() { "$top/scripts/netns.sh" down 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# the bundled model with 8 sequences of 128 bytes per rank (as bench/overlap.sh)
batch="per_device_batch_size=8"
shape="$batch ici_expert_parallelism=1"
flat="ici_fsdp_parallelism=4"
hsdp="--slices 2 dcn_data_parallelism=2"
two="--slices 2 dcn_fsdp_parallelism=2"
net() { # smoe ARGS... across the two hosts
  "$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
    -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" "$@"
}
# the profile across the two hosts, on the calibration's mesh (hosts x
# ranks of a host: fsdp=2 x expert=2), where it times a layer's gathers and
# reductions across the link as smoe train issues them (dcn_* and
# gather_core_fraction; src/calib/layer_gathers.c) and profile_drift.sh
# compares the time of a cross-host step; on another mesh it keeps the
# one-weight sweep's figures; the layers timed at the runs' batch
calibrate() { # FILE
  net sim --calibrate --out "$1" ici_fsdp_parallelism=2 ici_expert_parallelism=2 $batch \
    >"$dir/cal.out" 2>&1 || { tail -5 "$dir/cal.out"; exit 1; }
}
predict() { # MESH PROFILE ARGS...: smoe sim of a layout at the runs' shape, prefetch depth 1
  mesh_=$1 hw_=$2
  shift 2
  # shellcheck disable=SC2086
  "$build/smoe" sim --base "$build/configs/train.yml" --model tiny --devices 4 $mesh_ $shape \
    --hardware "$hw_" --batch 8 --seq 128 --remat none --dtype-bytes 4 --prefetch-depth 1 "$@"
}
