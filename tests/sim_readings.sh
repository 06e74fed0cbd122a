#!/bin/sh
# A scenario's declared readings: smoe sim predicts under every combination
# of the unstated facts' values. Oracles: the combination that equals the
# scenario's own shape gives the main table's rows; the envelope is each
# row's smallest and largest figure over the combinations (recomputed here
# from the columns); a reported figure is "inside" exactly when it lies in
# it; a fact given on the command line is not varied; a bad readings block
# is refused in one line at its file:line:col.
# usage: sim_readings.sh SMOE
smoe=$1
. "$(dirname "$0")/check_lib.sh"
"$smoe" sim --scenario seed >"$dir/seed.txt" || bad "smoe sim --scenario seed"
grep -q '^predicted under every reading .*: 6 combinations$' "$dir/seed.txt" &&
  grep -q '^  R1  seq_len=8192 maxtext_gather_dtype=fp32$' "$dir/seed.txt" &&
  grep -q '^  R6  seq_len=2048 maxtext_gather_dtype=bf16$' "$dir/seed.txt" &&
  ok "6 combinations, each named" || bad "the combinations"
# R1 (8192, as stored) is the scenario's own shape: the main table's steps
awk '/^schedule  .*executor$/ { t = 1; next } t && NF == 0 { t = 0 }
     t { main[$1] = sprintf("%.0f", $2) }
     /^step ms / { s = 1; next } s && /^schedule/ { next } s && NF == 0 { s = 0 }
     s { n++; if (main[$1] != $2) { print "row " $1 ": " $2 " vs " main[$1]; bad = 1 } }
     END { exit (bad || n < 7) }' "$dir/seed.txt" >"$dir/r1" &&
  ok "R1 equals the main table" || bad "R1 is not the main table: $(cat "$dir/r1")"
# the envelope and the inside/outside verdicts, from the columns
awk '/^(step ms|exposed AG ms|peak HBM GiB) / { s = 1; next } s && /^schedule/ { next }
     s && NF == 0 { s = 0 } s {
       lo = 1e300; hi = -1e300
       for (i = 2; i <= 7; i++) { if ($i + 0 < lo) lo = $i + 0; if ($i + 0 > hi) hi = $i + 0 }
       split($8, e, "-"); rows++
       if (e[1] + 0 != lo || e[2] + 0 != hi) { print $1 ": " $8 " vs " lo "-" hi; bad = 1 }
       if (NF == 10) {
         tol = (hi - lo) * 0 + 0.05 # the columns and the envelope are rounded alike
         inside = $9 + 0 >= lo - tol && $9 + 0 <= hi + tol
         if ((inside && $10 != "inside") || (!inside && $10 != "outside")) {
           print $1 ": " $9 " " $10 " of " lo "-" hi; bad = 1 }
         verdicts++
       }
     }
     END { exit (bad || rows != 21 || verdicts < 10) }' "$dir/seed.txt" >"$dir/env" &&
  ok "envelopes and verdicts" || bad "envelope: $(cat "$dir/env")"
"$smoe" sim --scenario seed --seq 4096 >"$dir/seq.txt" || bad "--seq 4096"
grep -q ': 2 combinations$' "$dir/seq.txt" &&
  grep -q '^  R1  maxtext_gather_dtype=fp32$' "$dir/seq.txt" &&
  ok "a fact on the command line is not varied" || bad "--seq 4096 still varies seq_len"
"$smoe" sim --scenario seed --json >"$dir/seed.json" || bad "--json"
tr -d ' \n\t' <"$dir/seed.json" | grep -q '"readings":{"facts":{"seq_len":\[{"value":"8192","source":' &&
  tr -d ' \n\t' <"$dir/seed.json" | grep -q '"envelope":{"baseline":{"step_ms":\[' &&
  ok "JSON: facts, combinations, envelope" || bad "the JSON has no readings"
# refusals: one line at the scenario's file:line:col, exit 2
base="$SMOE_CONFIG_DIR/scenarios/seed.yml"
refused() { # NAME SED PATTERN
  sed "$2" "$base" >"$dir/$1.yml"
  "$smoe" sim --scenario "$dir/$1.yml" >/dev/null 2>"$dir/err"
  if [ $? -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q "$1.yml:[0-9]*:[0-9]*: $3" "$dir/err"; then
    ok "$1"
  else
    bad "$1: $(cat "$dir/err")"
  fi
}
refused unknown 's/^  seq_len:$/  seqlen:/' "readings: unknown fact 'seqlen'"
refused badval 's/{value: 4096,/{value: 4096.5,/' "readings: seq_len: expected an integer"
refused dup 's/{value: 2048,/{value: 8192,/' "readings: seq_len: '8192' is given twice"
refused dtype 's/{value: bf16,/{value: int8,/' "readings: maxtext_gather_dtype: expected fp32 or bf16"
refused nosrc 's/, source: "tpu-recipes[^"]*"//' "readings: seq_len: each reading is"
summary
