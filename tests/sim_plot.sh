#!/bin/sh
# `smoe sim --plot` rendered by a real SVG renderer (librsvg's rsvg-convert)
# and the picture checked: size, the Pareto panel and every lane that has
# spans drawn; with MPIEXEC, `smoe train --trace --plot` on 2 ranks the same
# way. usage: sim_plot.sh SMOE CHECK_PNG [MPIEXEC]
smoe=$1
check=$2
mpiexec=${3:-}
if ! command -v rsvg-convert >/dev/null 2>&1; then
  echo "skip: sim_plot: rsvg-convert not installed (Debian package librsvg2-bin; scripts/deps.sh installs it)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
set -e
"$smoe" sim --scenario seed --plot "$dir/seed.svg" >"$dir/seed.txt"
rsvg-convert "$dir/seed.svg" -o "$dir/seed.png"
"$check" "$dir/seed.png" "$dir/seed.svg"
# the envelope panels say what the text's readings table says: per figure,
# the rows, and how many reported figures lie inside their envelope
text=$(awk '/^(step ms|exposed AG ms|peak HBM GiB) /{k++; rows[k]=0; in_[k]=0; rep[k]=0; next}
  k && /^schedule /{next}
  k && NF == 0 {if (k) done[k]=1}
  k && !done[k] && NF > 1 {rows[k]++; if ($NF == "inside") {in_[k]++; rep[k]++} else if ($NF == "outside") rep[k]++}
  END {for (i = 1; i <= k; i++) printf "rows=%d inside=%d reported=%d\n", rows[i], in_[i], rep[i]}' "$dir/seed.txt")
svg=$(sed -n 's/.*panel envelope [0-9]* x=[0-9]* y=[0-9]* w=[0-9]* h=[0-9]* \(rows=.*\) -->/\1/p' "$dir/seed.svg")
if [ -z "$svg" ] || [ "$text" != "$svg" ]; then
  echo "FAIL: envelope panels '$svg' differ from the text's readings '$text'"
  exit 1
fi
echo "envelope panels match the readings table: $(echo "$svg" | tr '\n' ';')"
# a write error is reported, with the path
if [ -w /dev/full ]; then
  if "$smoe" sim --scenario seed --plot /dev/full >/dev/null 2>"$dir/err"; then
    echo "FAIL: --plot /dev/full exited 0"; exit 1
  fi
  grep -q "/dev/full" "$dir/err" || { echo "FAIL: no path in: $(cat "$dir/err")"; exit 1; }
  echo "write error to /dev/full reported: $(cat "$dir/err")"
fi
if [ -n "$mpiexec" ]; then
  timeout 120 "$mpiexec" -np 2 "$smoe" train --steps 2 --quiet --trace "$dir/train.json" \
    --plot "$dir/train.svg" >/dev/null
  rsvg-convert "$dir/train.svg" -o "$dir/train.png"
  "$check" "$dir/train.png" "$dir/train.svg"
  grep -c "<!-- lane 1 " "$dir/train.svg" | grep -q 4 || { echo "FAIL: rank 1's lanes missing"; exit 1; }
fi
