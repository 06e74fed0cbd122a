#!/bin/sh
# A scenario's declared readings: smoe sim predicts under every combination
# of the unstated facts' values. Oracles: the combination that equals the
# scenario's own shape gives the main table's rows; the envelope is each
# row's smallest and largest figure over the combinations (recomputed here
# from the columns); a reported figure is "inside" exactly when it lies in
# it; bf16 weights gathered "as stored" equal the bf16 gather reading; a
# stored-dtype reading and a variant's keys resolve as the same on the
# command line; a fact given on the command line (by option or by its
# MaxText key) is not varied; a bad readings block is refused in one line
# at its file:line:col.
# usage: sim_readings.sh SMOE
smoe=$1
. "$(dirname "$0")/check_lib.sh"
"$smoe" sim --scenario seed >"$dir/seed.txt" || bad "smoe sim --scenario seed"
grep -q '^predicted under every reading .*: 24 combinations$' "$dir/seed.txt" &&
  grep -q '^  R1  seq_len=8192 dtype_bytes=4 maxtext_gather_dtype=stored reduce_engine=shared$' "$dir/seed.txt" &&
  grep -q '^  R24 seq_len=2048 dtype_bytes=2 maxtext_gather_dtype=bf16 reduce_engine=own$' "$dir/seed.txt" &&
  ok "24 combinations, each named" || bad "the combinations"
# the readings' tables as "FIGURE ROW R VALUE" lines, in blocks of at most
# 12 columns (the header names each column's R), and "FIGURE ROW env LO HI
# [REPORTED VERDICT]" from the last block
cells() {
  awk '/^(step ms|exposed AG ms|peak HBM GiB)/ { fig = $1 $2; s = 1; next }
       s && /^schedule/ { n = NF - 1; for (i = 2; i <= NF; i++) r[i] = $i; next }
       s && NF == 0 { s = 0 }
       s { for (i = 2; i <= n + 1; i++) print fig, $1, r[i], $i
           if (NF > n + 1) { split($(n + 2), e, "-"); print fig, $1, "env", e[1], e[2], $(n + 3), $(n + 4) } }' "$1"
}
cells "$dir/seed.txt" >"$dir/cells"
# bf16 weights gathered as stored are gathered in bf16: R4-R6 (stored) equal
# R10-R12 (bf16), and R16-R18 equal R22-R24, in every table
awk '$3 ~ /^R/ { v[$1 " " $2 " " substr($3, 2)] = $4; rows[$1 " " $2] = 1 }
     END { for (k in rows) for (i = 4; i <= 18; i += (i == 6 ? 10 : 1)) {
             n++; if (v[k " " i] != v[k " " (i + 6)]) { print k " R" i ": " v[k " " i] " vs " v[k " " (i + 6)]; bad = 1 } }
           exit (bad || n != 21 * 6) }' "$dir/cells" >"$dir/same" &&
  ok "bf16 stored: the stored and bf16 gather readings agree" || bad "R4-6 vs R10-12: $(cat "$dir/same")"
# R1 (8192, fp32 stored, gathered as stored, shared) is the scenario's own
# shape: the main table's steps (printed to 0.1 ms there and to 1 ms here,
# so within the two roundings' 0.55 ms)
awk 'NR == FNR { if (/^schedule  .*executor$/) t = 1; else if (t && NF == 0) t = 0
                 else if (t) main[$1] = $2; next }
     $1 == "stepms" && $3 == "R1" { n++
       if (!($2 in main)) { print "row " $2 ": not in the main table"; bad = 1; next }
       d = main[$2] - $4
       if (d > 0.55 || d < -0.55) { print "row " $2 ": " $4 " vs " main[$2]; bad = 1 } }
     END { exit (bad || n < 7) }' "$dir/seed.txt" "$dir/cells" >"$dir/r1" &&
  ok "R1 equals the main table" || bad "R1 is not the main table: $(cat "$dir/r1")"
# the envelope and the inside/outside verdicts, from the columns
awk '$3 ~ /^R/ { k = $1 " " $2; if (!(k in lo) || $4 + 0 < lo[k]) lo[k] = $4 + 0
                 if (!(k in hi) || $4 + 0 > hi[k]) hi[k] = $4 + 0; cols[k]++; next }
     $3 == "env" { k = $1 " " $2; rows++
       if (cols[k] != 24 || $4 + 0 != lo[k] || $5 + 0 != hi[k]) { print k ": " $4 "-" $5 " vs " lo[k] "-" hi[k] " over " cols[k]; bad = 1 }
       if ($6 != "") {
         tol = 0.05 # the columns and the envelope are rounded alike
         inside = $6 + 0 >= lo[k] - tol && $6 + 0 <= hi[k] + tol
         if ((inside && $7 != "inside") || (!inside && $7 != "outside")) { print k ": " $6 " " $7; bad = 1 }
         verdicts++
       } }
     END { exit (bad || rows != 21 || verdicts < 10) }' "$dir/cells" >"$dir/env" &&
  ok "envelopes and verdicts" || bad "envelope: $(cat "$dir/env")"
# reduce_engine own is the rule of a profile with three engines a device
# (oracle: tpu7x with collective_engines 6); shared is this profile's rule
sed 's/^collective_engines: 4 /collective_engines: 6 /' "$SMOE_CONFIG_DIR/hardware/tpu7x.yml" >"$dir/six.yml"
main() { sed -n '/^schedule  .*executor$/,/^$/p' "$1"; }
"$smoe" sim --scenario seed --reduce-engine own >"$dir/own.txt" &&
  "$smoe" sim --scenario seed --hardware "$dir/six.yml" >"$dir/six.txt" &&
  [ "$(main "$dir/own.txt")" = "$(main "$dir/six.txt")" ] &&
  [ "$(main "$dir/own.txt")" != "$(main "$dir/seed.txt")" ] &&
  grep -q '^reading: the gradient reductions run on an engine of their own' "$dir/own.txt" &&
  ok "reduce_engine own: a three-engine profile's rows" || bad "reduce_engine own"
"$smoe" sim --scenario seed --reduce-engine shared >"$dir/shared.txt" &&
  [ "$(main "$dir/shared.txt")" = "$(main "$dir/seed.txt")" ] &&
  grep -q ': 12 combinations$' "$dir/shared.txt" &&
  ok "reduce_engine shared: the default rows, the reading not varied" || bad "reduce_engine shared"
"$smoe" sim --scenario seed --seq 4096 >"$dir/seq.txt" || bad "--seq 4096"
grep -q ': 8 combinations$' "$dir/seq.txt" &&
  grep -q '^  R1  dtype_bytes=4 maxtext_gather_dtype=stored reduce_engine=shared$' "$dir/seq.txt" &&
  ok "a fact on the command line is not varied" || bad "--seq 4096 still varies seq_len"
"$smoe" sim --scenario seed max_target_length=8192 >"$dir/mtl.txt" || bad "max_target_length=8192"
grep -q ': 8 combinations$' "$dir/mtl.txt" &&
  ok "a fact's MaxText key on the command line is not varied" || bad "max_target_length still varies"
"$smoe" sim --scenario seed --gather-dtype bf16 --dtype-bytes 4 >"$dir/gb.txt" &&
  grep -q ': 12 combinations$' "$dir/gb.txt" &&
  ok "compressed gathers with the stored dtype fixed at fp32" || bad "--gather-dtype bf16 --dtype-bytes 4"
"$smoe" sim --scenario seed --json >"$dir/seed.json" || bad "--json"
tr -d ' \n\t' <"$dir/seed.json" | grep -q '"readings":{"facts":{"seq_len":\[{"value":"8192","source":' &&
  tr -d ' \n\t' <"$dir/seed.json" | grep -q '"envelope":{"baseline":{"step_ms":\[' &&
  ok "JSON: facts, combinations, envelope" || bad "the JSON has no readings"
base="$SMOE_CONFIG_DIR/scenarios/seed.yml"
# SED: the seed with its readings and variants replaced by FILE's block
with_block() { # BLOCKFILE OUT
  awk -v f="$1" '/^readings:/ { while ((getline l < f) > 0) print l; skip = 1; next }
       skip && /^# as reported/ { skip = 0 } !skip' "$base" >"$2"
}
# FIELD of ROW in the Nth "schedules" object of a JSON FILE (1: the main
# table's; 2, 3...: the readings' combinations in order)
field() { # FILE N ROW FIELD
  tr -d ' \n\t' <"$1" | sed 's/"schedules":/\n/g' | sed -n "$(($2 + 1))p" |
    grep -o "\"$3\":{[^}]*" | head -1 | grep -o "\"$4\":[^,}]*" | cut -d: -f2
}
# A stored-dtype reading resolves the gradients and moments from it, as the
# same dtype on the command line does (oracle: --dtype-bytes 2's table)
printf 'readings:\n  dtype_bytes:\n    - {value: 4, source: a}\n    - {value: 2, source: b}\n' \
  >"$dir/dt.block"
with_block "$dir/dt.block" "$dir/dt.yml"
"$smoe" sim --scenario "$dir/dt.yml" --json >"$dir/dt.json" || bad "dtype_bytes readings"
"$smoe" sim --scenario "$dir/dt.yml" --dtype-bytes 2 --json >"$dir/dt2.json" || bad "--dtype-bytes 2"
for r in baseline prefetch uniform_depth_1; do
  got="$(field "$dir/dt.json" 3 $r step_ms) $(field "$dir/dt.json" 3 $r exposed_gather_ms)"
  got="$got $(field "$dir/dt.json" 3 $r peak_hbm_gib | awk '{ printf "%.6f", $1 }')"
  want="$(field "$dir/dt2.json" 1 $r step_ms) $(field "$dir/dt2.json" 1 $r exposed_gather_ms)"
  want="$want $(field "$dir/dt2.json" 1 $r peak_hbm_bytes | awk '{ printf "%.6f", $1 / 2^30 }')"
  [ "$got" = "$want" ] && [ "$got" != "$(field "$dir/dt.json" 2 $r step_ms)" ] &&
    ok "dtype_bytes=2 reading: $r as --dtype-bytes 2" ||
    bad "dtype_bytes=2 reading, $r: '$got', --dtype-bytes 2: '$want'"
done
# A variant's keys resolve what the scenario leaves open, as on the command
# line (oracle: the prefetch row with the same key given there)
printf 'variants:\n  wbf16:\n    overrides: [weight_dtype=bfloat16]\n' >"$dir/v.block"
with_block "$dir/v.block" "$dir/v.yml"
"$smoe" sim --scenario "$dir/v.yml" --json >"$dir/v.json" || bad "a weight_dtype variant"
"$smoe" sim --scenario "$dir/v.yml" weight_dtype=bfloat16 --json >"$dir/v2.json" ||
  bad "weight_dtype=bfloat16"
for f in step_ms exposed_gather_ms peak_hbm_bytes; do
  got=$(field "$dir/v.json" 1 wbf16 $f) want=$(field "$dir/v2.json" 1 prefetch $f)
  [ -n "$want" ] && [ "$got" = "$want" ] && [ "$got" != "$(field "$dir/v.json" 1 prefetch $f)" ] &&
    ok "a variant's weight_dtype is applied: $f" || bad "variant weight_dtype, $f: '$got', want '$want'"
done
# refusals: one line at the scenario's file:line:col, exit 2
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
refused dtype 's/{value: bf16,/{value: int8,/' "readings: maxtext_gather_dtype: expected stored, fp32 or bf16"
# a scenario's overrides and a variant's are named at their file:line:col
refused override 's/ici_expert_parallelism=4/ici_expert_parallelism=four/' "'ici_expert_parallelism' must be an integer"
refused variant 's/^    rules: ep-as-dp$/&\n    overrides: [max_target_length=4096]/' "max_target_length contradicts --seq 8192"
refused nosrc 's/, source: "tpu-recipes[^"]*"//' "readings: seq_len: each reading is"
summary
