#!/bin/sh
# One layout of bench/hsdp.sh across the shaped link, traced: the
# profile calibrated across the two hosts as hsdp.sh does, smoe sim's
# predicted step (--trace, its prefetch row) and smoe train's measured one
# (--trace, prefetch at depth 1, the step of median length, rank 0; with
# DEPTH 0 both sides without prefetch: smoe sim's baseline row), each
# printed as a timeline by bench/trace_steps.py: the compute units with the
# wait before each, the gathers and reductions in batches with their issue
# and end. Where the prediction and the measurement part, the two
# timelines say at which unit and which collective.
# Needs root (network namespaces), Open MPI.
# usage: bench/hsdp_trace.sh [BUILD_DIR] [LAYOUT] [RATE] [STEPS] [DEPTH]
#   LAYOUT: flat, hsdp or two (default two); RATE default 250mbit; STEPS 12;
#   DEPTH: 1 (prefetch, default) or 0 (none)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
layout=${2:-two}
rate=${3:-250mbit}
steps=${4:-12}
depth=${5:-1}
case "$depth" in
  0) row=0 what="no prefetch" ;;
  1) row=1 what="prefetch" ;;
  *) echo "hsdp_trace.sh: depth '$depth': 0 or 1" >&2; exit 2 ;;
esac
. "$top/bench/table_lib.sh"
. "$top/bench/hsdp_lib.sh"
case "$layout" in
  flat | hsdp | two) eval "mesh=\$$layout" ;;
  *) echo "hsdp_trace.sh: layout '$layout': flat, hsdp or two" >&2; exit 2 ;;
esac
"$top/scripts/netns.sh" down 2>/dev/null || true
"$top/scripts/netns.sh" up 2 "$rate"
echo "== commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown); layout $layout ($mesh), link $rate, $steps steps, $what"
calibrate "$dir/hw.yml"
indented grep -E '^(dcn_|ici_bandwidth|peak_flops)' "$dir/hw.yml"
predict "$mesh" "$dir/hw.yml" --trace "$dir/sim.json" >"$dir/sim.txt"
# shellcheck disable=SC2086
net train --steps "$steps" --quiet --prefetch-depth "$depth" $mesh $shape --trace "$dir/train.json" \
  >"$dir/train.txt"
echo
echo "== predicted (smoe sim, $what)"
python3 "$top/bench/trace_steps.py" "$dir/sim.json" --pid "$row"
echo
echo "== measured (smoe train, $what)"
python3 "$top/bench/trace_steps.py" "$dir/train.json"
