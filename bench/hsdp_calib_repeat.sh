#!/bin/sh
# How far the calibrated profile moves the prediction (bench/calib_repeat.sh
# does the same for one host's figures): smoe sim --calibrate
# N times in a row across the two network-namespace hosts of
# bench/hsdp.sh (its shape and layouts, bench/hsdp_lib.sh), then smoe sim's
# no-prefetch and prefetch step and exposed wait for flat FSDP, HSDP and
# two-level on each profile, with each profile's within-host figures
# (ici_latency, ici_bandwidth). A prediction cannot be checked more finely
# than the spread of its own inputs: this prints that spread.
# Needs root (network namespaces), Open MPI.
# usage: bench/hsdp_calib_repeat.sh [BUILD_DIR] [RATE] [N]   (default 2gbit, 5)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
rate=${2:-2gbit}
n=${3:-5}
. "$top/bench/hsdp_lib.sh"
"$top/scripts/netns.sh" down 2>/dev/null || true
"$top/scripts/netns.sh" up 2 "$rate"
echo "== commit $(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown); link $rate, $n calibrations"
i=1
while [ "$i" -le "$n" ]; do
  calibrate "$dir/hw-$i.yml"
  i=$((i + 1))
done
printf '%-4s %-6s %10s %10s %10s %10s %12s %14s\n' cal layout np-step np-wait p-step p-wait ici_latency ici_bandwidth
i=1
while [ "$i" -le "$n" ]; do
  for layout in flat hsdp two; do
    eval "mesh=\$$layout"
    predict "$mesh" "$dir/hw-$i.yml" --json >"$dir/p.json"
    python3 - "$dir/p.json" "$dir/hw-$i.yml" "$i" "$layout" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))["schedules"]
hw = dict(re.findall(r"^(ici_latency|ici_bandwidth): *([^ #\n]+)", open(sys.argv[2]).read(), re.M))
b, p = s["baseline"], s["prefetch"]
print(f"{sys.argv[3]:<4} {sys.argv[4]:<6} {b['step_ms']:10.1f} {b['exposed_gather_ms']:10.1f} "
      f"{p['step_ms']:10.1f} {p['exposed_gather_ms']:10.1f} {float(hw['ici_latency']):12.3g} "
      f"{float(hw['ici_bandwidth']):14.3g}")
PY
  done
  i=$((i + 1))
done
