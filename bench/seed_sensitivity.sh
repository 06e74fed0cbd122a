#!/bin/sh
# The seed experiment's sensitivity to the facts the change description does
# not state: sequence length 2048 / 4096 / 8192, the compute efficiency of
# the TPU7x profile x0.8 / x1 / x1.2, and weight_dtype float32 (MaxText's
# default) / bfloat16. One markdown row per setting: predicted baseline step,
# step change of each schedule against the baseline, exposed gather wait and
# peak HBM of baseline and prefetch.
# usage: bench/seed_sensitivity.sh BUILD_DIR
set -eu
build=${1:-build}
export SMOE_CONFIG_DIR="$build/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hw="$build/configs/hardware/tpu7x.yml"
eff=$(sed -n 's/^compute_efficiency: *\([0-9.e+-]*\).*/\1/p' "$hw")
echo "| seq | efficiency | weight_dtype | baseline step ms | prefetch | ep-as-dp | ring | no dedicated core | exposed AG ms base / prefetch | peak HBM GiB base / prefetch |"
echo "|---|---|---|---|---|---|---|---|---|---|"
row() { # seq scale dtype
  e=$(awk "BEGIN{printf \"%.4g\", $eff * $2}")
  sed "s/^compute_efficiency: .*/compute_efficiency: $e/" "$hw" >"$tmp/hw.yml"
  "$build/smoe" sim --scenario seed --seq "$1" --hardware "$tmp/hw.yml" "weight_dtype=$3" \
    >"$tmp/sim.txt"
  awk -v seq="$1" -v e="$e" -v dt="$3" '
    /^predicted vs reported/ { on = 1; next }
    /^where the scenario/ { on = 0 }
    on && $1 == "baseline" { bs = $4; be = $10; bh = $13 }
    on && $1 == "prefetch" { pc = $7; pe = $10; ph = $13 }
    on && $1 == "prefetch_ep_as_dp" { dp = $7 }
    on && $1 == "prefetch_ring_of_experts" { ro = $7 }
    on && $1 == "prefetch_shared_queue" { sq = $7 }
    END { printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |\n",
          seq, e, dt, bs, pc, dp, ro, sq, be, pe, bh, ph }' "$tmp/sim.txt"
}
for s in 2048 4096 8192; do
  for f in 0.8 1 1.2; do
    row "$s" "$f" float32
  done
done
for s in 2048 4096 8192; do
  row "$s" 1 bfloat16
done
row 8192 0.8 bfloat16
row 8192 1.2 bfloat16
