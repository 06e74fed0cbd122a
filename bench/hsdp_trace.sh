#!/bin/sh
# One layout of bench/hsdp.sh across the shaped link, traced: the
# profile calibrated across the two hosts as hsdp.sh does, smoe sim's
# predicted step (--trace, its prefetch row) and smoe train's measured one
# (--trace, prefetch at depth 1, the step of median length, rank 0), each
# printed as a timeline by bench/trace_steps.py: the compute units with the
# wait before each, the gathers and reductions in batches with their issue
# and end. Where the prediction and the measurement part, the two
# timelines say at which unit and which collective.
# Needs root (network namespaces), Open MPI.
# usage: bench/hsdp_trace.sh [BUILD_DIR] [LAYOUT] [RATE] [STEPS]
#   LAYOUT: flat, hsdp or two (default two); RATE default 250mbit; STEPS 12
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
layout=${2:-two}
rate=${3:-250mbit}
steps=${4:-12}
. "$top/scripts/mpi-env.sh"
. "$top/bench/table_lib.sh"
export SMOE_CONFIG_DIR="$build/configs"
batch="per_device_batch_size=8"
shape="$batch ici_expert_parallelism=1"
case "$layout" in
  flat) mesh="ici_fsdp_parallelism=4" ;;
  hsdp) mesh="--slices 2 dcn_data_parallelism=2" ;;
  two) mesh="--slices 2 dcn_fsdp_parallelism=2" ;;
  *) echo "hsdp_trace.sh: layout '$layout': flat, hsdp or two" >&2; exit 2 ;;
esac
dir=$(mktemp -d)
cleanup() { "$top/scripts/netns.sh" down 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
net() {
  "$top/scripts/netns.sh" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
    -x OPENBLAS_NUM_THREADS -x SMOE_CONFIG_DIR "$build/smoe" "$@"
}
"$top/scripts/netns.sh" down 2>/dev/null || true
"$top/scripts/netns.sh" up 2 "$rate"
echo "== commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown); layout $layout ($mesh), link $rate, $steps steps"
net sim --calibrate --out "$dir/hw.yml" ici_fsdp_parallelism=2 ici_expert_parallelism=2 $batch \
  >"$dir/cal.out" 2>&1 || { tail -5 "$dir/cal.out"; exit 1; }
indented grep -E '^(dcn_|ici_bandwidth|peak_flops)' "$dir/hw.yml"
# shellcheck disable=SC2086
"$build/smoe" sim --base "$build/configs/train.yml" --model tiny --devices 4 $mesh $shape \
  --hardware "$dir/hw.yml" --batch 8 --seq 128 --remat none --dtype-bytes 4 \
  --prefetch-depth 1 --trace "$dir/sim.json" >"$dir/sim.txt"
# shellcheck disable=SC2086
net train --steps "$steps" --quiet $mesh $shape --trace "$dir/train.json" >"$dir/train.txt"
echo
echo "== predicted (smoe sim, prefetch)"
python3 "$top/bench/trace_steps.py" "$dir/sim.json" --pid 1
echo
echo "== measured (smoe train, prefetch)"
python3 "$top/bench/trace_steps.py" "$dir/train.json"
