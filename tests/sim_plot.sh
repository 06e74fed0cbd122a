#!/bin/sh
# `smoe sim --plot` rendered by a real SVG renderer (librsvg's rsvg-convert)
# and the picture checked: size, the Pareto panel and every lane that has
# spans drawn. usage: sim_plot.sh SMOE CHECK_PNG
smoe=$1
check=$2
if ! command -v rsvg-convert >/dev/null 2>&1; then
  echo "SKIP: rsvg-convert not installed (Debian package librsvg2-bin; scripts/deps.sh installs it)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
set -e
"$smoe" sim --scenario seed --plot "$dir/seed.svg" >/dev/null
rsvg-convert "$dir/seed.svg" -o "$dir/seed.png"
"$check" "$dir/seed.png" "$dir/seed.svg"
# a write error is reported, with the path
if [ -w /dev/full ]; then
  if "$smoe" sim --scenario seed --plot /dev/full >/dev/null 2>"$dir/err"; then
    echo "FAIL: --plot /dev/full exited 0"; exit 1
  fi
  grep -q "/dev/full" "$dir/err" || { echo "FAIL: no path in: $(cat "$dir/err")"; exit 1; }
  echo "write error to /dev/full reported: $(cat "$dir/err")"
fi
