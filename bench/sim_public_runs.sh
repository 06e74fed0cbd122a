#!/bin/sh
# smoe sim against public accelerator runs: every run file of
# configs/public-runs/ (a scenario file: the run's model, hardware, devices
# and MaxText keys as published, its measured step under
# reported.baseline.step_ms and the source of every number; dev/ holds the
# development set, check/ the check set) simulated as given, its baseline
# row (XLA's scan, MaxText's own executor) against the measured step. A run
# smoe sim refuses is a miss, with smoe's one-line reason; it counts in the
# runs and against "within 15 %", not in the mean absolute error. smoe sim
# is deterministic: the table does not depend on the machine.
# usage: bench/sim_public_runs.sh BUILD_DIR [--check] [--out FILE] [RUN.yml ...]
#   --check     no header (commit, date): the table and the summary only
#   --out FILE  also write the output to FILE
# Exit 1 when a run file is malformed (an error in the file itself, a
# missing measured step or source, a model or hardware profile smoe does
# not have) or smoe sim fails other than by refusing in one line.
set -eu
build=${1:?usage: bench/sim_public_runs.sh BUILD_DIR [--check] [--out FILE] [RUN.yml ...]}
shift
check=0
out=
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=1; shift ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || set -- configs/public-runs/dev/*.yml configs/public-runs/check/*.yml
export SMOE_CONFIG_DIR="$build/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bad=0

# FILE: empty when the run file has what the table needs, else what it lacks
lacks() {
  awk '
    /^[a-z_]+:/ { sec = $1 }
    /^(model|hardware|devices):/ { top[$1] = 1 }
    sec == "reported:" && /^  baseline: *\{ *step_ms: *[0-9.]+ *\} *$/ { step = 1 }
    sec == "sources:" && /^  (step_ms|config|devices|model): *"[^"]+" *$/ { split($1, k, ":"); src[k[1]] = 1 }
    END {
      m = ""
      if (!top["model:"]) m = m " model"
      if (!top["hardware:"]) m = m " hardware"
      if (!top["devices:"]) m = m " devices"
      if (!step) m = m " reported.baseline: {step_ms: N}"
      n = split("step_ms config devices model", want, " ")
      for (i = 1; i <= n; i++) if (!src[want[i]]) m = m " sources." want[i]
      print substr(m, 2)
    }' "$1"
}

# the measured step (ms) and the hardware a run file names
measured() { sed -n 's/^  baseline: *{ *step_ms: *\([0-9.]*\) *} *$/\1/p' "$1"; }
hardware() { sed -n 's/^hardware: *\([^ #]*\).*/\1/p' "$1"; }

: >"$tmp/rows"
for f in "$@"; do
  name=$(basename "$f" .yml)
  set_=check
  [ "$(basename "$(dirname "$f")")" = dev ] && set_=dev
  miss=$(lacks "$f")
  if [ -n "$miss" ]; then
    echo "$f: malformed run file: missing $miss" >&2
    bad=1
    continue
  fi
  hw=$(hardware "$f")
  meas=$(measured "$f")
  rc=0
  "$build/smoe" sim --scenario "$f" >"$tmp/out" 2>"$tmp/err" || rc=$?
  if [ "$rc" -eq 0 ]; then
    pred=$(awk '$1 == "baseline" { print $2; exit }' "$tmp/out")
    if [ -z "$pred" ]; then
      echo "$f: smoe sim printed no baseline row" >&2
      bad=1
      continue
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$set_" "$name" "$hw" "$meas" "$pred" >>"$tmp/rows"
    continue
  fi
  # a refusal is one line; the build directory's paths are shown relative
  why=$(sed -e 's/^smoe: //' -e "s|$build/||g" -e 's/|/\\|/g' "$tmp/err")
  # an error in the file is the file's fault, except one named at a
  # KEY=VALUE entry of its overrides: a MaxText key smoe sim refuses
  at=$(printf '%s\n' "$why" | sed -n "s|^$f:\([0-9]*\):\([0-9]*\): .*|\1 \2|p")
  entry=
  [ -n "$at" ] && entry=$(sed -n "${at% *}p" "$f" | cut -c"${at#* }"- |
    grep '^[A-Za-z_][A-Za-z0-9_]*=' || true)
  case $why in
    *"unknown model"* | *"no hardware profile"*) at=malformed ;;
  esac
  if [ -n "$at" ] && [ -z "$entry" ]; then
    echo "$f: malformed run file: $why" >&2
    bad=1
    continue
  fi
  if [ "$rc" -gt 2 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    echo "$f: smoe sim failed (exit $rc): $(head -c 400 "$tmp/err")" >&2
    bad=1
    continue
  fi
  printf '%s\t%s\t%s\t%s\t-\t%s\n' "$set_" "$name" "$hw" "$meas" "$why" >>"$tmp/rows"
done

{
  if [ "$check" -eq 0 ]; then
    echo "# smoe sim against public accelerator runs"
    echo
    echo "- date: $(date -u +%Y-%m-%d)"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: \`bench/sim_public_runs.sh $build\`"
    echo "- machine: any (smoe sim is deterministic: the same commit gives the same table)"
    echo
  fi
  echo "| set | run | hardware | predicted ms | measured ms | error |"
  echo "|---|---|---|---|---|---|"
  awk -F '\t' '{
    if ($5 == "-") printf "| %s | %s | %s | refused: %s | %.1f | miss |\n", $1, $2, $3, $6, $4
    else printf "| %s | %s | %s | %.1f | %.1f | %+.1f %% |\n", $1, $2, $3, $5, $4, ($5 - $4) / $4 * 100
  }' "$tmp/rows"
  echo
  for s in check dev; do
    awk -F '\t' -v s="$s" '$1 == s {
      n++
      if ($5 == "-") { r++; next }
      e = ($5 - $4) / $4 * 100; if (e < 0) e = -e
      p++; sum += e; if (e <= 15) w++
    } END {
      printf "%s set: %d runs, %d within 15 %%, %d refused, mean absolute error %s\n",
             s, n, w, r, p ? sprintf("%.1f %% over %d predicted", sum / p, p) : "- (none predicted)"
    }' "$tmp/rows"
  done
} >"$tmp/table"
cat "$tmp/table"
[ -z "$out" ] || cp "$tmp/table" "$out"
exit "$bad"
