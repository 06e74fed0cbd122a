#!/bin/sh
# bench/sim_public_runs.sh in its check mode: every run file of
# configs/public-runs/ has what the table needs and smoe sim either
# predicts it or refuses it in one line (so the set cannot rot silently);
# the table is well formed (one row per run, six cells, a number or a
# refusal, an error or "miss") and its summary is recomputed here on made-up
# runs; a malformed run file (no measured step, no source, a key the
# scenario reader refuses, a model or profile smoe lacks, broken YAML)
# fails naming the file.
# usage: sim_public_runs.sh SOURCE_DIR BUILD_DIR
top=$1
build=$2
. "$(dirname "$0")/check_lib.sh"
cd "$top" || exit 1
bench=bench/sim_public_runs.sh

# FILE N: FILE's table has N rows, each well formed
rows_ok() {
  awk -v n="$2" '
    /^\| (dev|check) \| / {
      rows++
      c = split($0, cell, " \\| ")
      if (c != 6) { print "cells: " $0; bad = 1 }
      if (cell[4] !~ /^-?[0-9]+\.[0-9]$/ && cell[4] !~ /^refused: ./) { print "predicted: " $0; bad = 1 }
      if (cell[5] !~ /^[0-9]+\.[0-9]$/) { print "measured: " $0; bad = 1 }
      if (cell[6] !~ /^[-+][0-9]+\.[0-9] % \|$/ && cell[6] != "miss |") { print "error: " $0; bad = 1 }
      if ((cell[4] ~ /^refused/) != (cell[6] == "miss |")) { print "miss: " $0; bad = 1 }
    }
    END { if (rows != n) { print "rows " rows " of " n; bad = 1 } exit bad }' "$1"
}

# the bundled set, in check mode
n=$(ls configs/public-runs/dev/*.yml configs/public-runs/check/*.yml | wc -l)
if sh "$bench" "$build" --check >"$dir/all" 2>"$dir/err"; then
  ok "every bundled run file is read ($n runs)"
else
  bad "the bundled set: $(cat "$dir/err")"
fi
if rows_ok "$dir/all" "$n" >"$dir/why"; then ok "the table has a well-formed row per run"
else bad "the table: $(cat "$dir/why")"; fi
ndev=$(ls configs/public-runs/dev/*.yml | wc -l)
grep -q "^dev set: $ndev runs, [0-9]* within 15 %, [0-9]* refused, mean absolute error " "$dir/all" &&
  grep -q "^check set: $((n - ndev)) runs, " "$dir/all" &&
  ok "a summary per set" || bad "summaries: $(grep 'set:' "$dir/all")"
grep -q "^# \|^- commit" "$dir/all" && bad "--check printed the header" || ok "--check prints no header"

# made-up runs from the development run: one smoe sim predicts (remat full
# written as the scenario's reading), one it refuses (a quantized run)
dev=configs/public-runs/dev/deepseek3-671b-tpu7x-4x8x8-xlp.yml
mkdir -p "$dir/dev" "$dir/check"
grep -v "remat_policy=custom" "$dev" >"$dir/dev/pred.yml"
echo "remat: full" >>"$dir/dev/pred.yml"
sed 's/^overrides:$/overrides:\n  - quantization=int8/' "$dev" >"$dir/dev/refused.yml"
if sh "$bench" "$build" --check "$dir/dev/pred.yml" "$dir/dev/refused.yml" >"$dir/two" 2>"$dir/err"; then
  ok "a predicted and a refused run"
else
  bad "made-up runs: $(cat "$dir/err")"
fi
rows_ok "$dir/two" 2 >"$dir/why" && ok "their rows are well formed" || bad "$(cat "$dir/why")"
pred=$(SMOE_CONFIG_DIR="$build/configs" "$build/smoe" sim --scenario "$dir/dev/pred.yml" |
       awk '$1 == "baseline" { print $2; exit }')
meas=$(sed -n 's/^  baseline: {step_ms: \([0-9.]*\)}$/\1/p' "$dev")
want=$(awk -v p="$pred" -v m="$meas" 'BEGIN {
  e = (p - m) / m * 100; a = e < 0 ? -e : e
  printf "| dev | pred | tpu7x | %.1f | %.1f | %+.1f %% |\n", p, m, e
  printf "dev set: 2 runs, %d within 15 %%, 1 refused, mean absolute error %.1f %% over 1 predicted\n",
         a <= 15, a }')
echo "$want" | while IFS= read -r line; do grep -qxF "$line" "$dir/two" || echo "$line"; done >"$dir/miss"
[ -s "$dir/miss" ] && bad "expected: $(cat "$dir/miss"); got: $(cat "$dir/two")" ||
  ok "the predicted row and the summary, recomputed ($pred ms against $meas ms)"
grep -q "^| dev | refused | tpu7x | refused: [^ ]*/refused.yml:[0-9]*:[0-9]*: quantization: .* | $meas.0 | miss |$" \
  "$dir/two" && ok "the refusal is one line, a miss" || bad "refused row: $(grep refused "$dir/two")"
grep -q "^check set: 0 runs, " "$dir/two" && ok "a set by its folder" || bad "sets: $(cat "$dir/two")"

# malformed run files fail, naming the file
malformed() { # NAME what SED
  sed "$3" "$dev" >"$dir/check/$1.yml"
  if sh "$bench" "$build" --check "$dir/check/$1.yml" >/dev/null 2>"$dir/err"; then
    bad "$2: accepted"
  elif grep -q "^$dir/check/$1.yml: malformed run file: " "$dir/err"; then
    ok "$2: $(cut -c1-120 "$dir/err")"
  else
    bad "$2: $(cat "$dir/err")"
  fi
}
malformed nostep "no measured step" '/^  baseline: /d'
malformed nosource "no source of the step" '/^  step_ms: /d'
malformed nohw "no hardware" '/^hardware: /d'
malformed key "a key the scenario reader refuses" 's/^description:/descripton:/'
malformed model "a model smoe does not have" 's/^model: .*/model: deepseek3-67b/'
malformed hwname "a hardware profile smoe does not have" 's/^hardware: .*/hardware: tpu7y/'
malformed yaml "broken YAML" 's/^overrides:$/overrides: [/'
summary
