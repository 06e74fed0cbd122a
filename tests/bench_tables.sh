#!/bin/sh
# The benchmarks' tables on hand-made input, without running a benchmark:
# bench/trace_steps.py prints a trace's step as batches and gaps;
# bench/overlap_table.py keeps each schedule's steps after the run's
# warm-up round (one step of each schedule, not warmup_steps_skipped of
# each) and fails with one line where a schedule has none left; a table
# that fails ends its benchmark with a non-zero status (bench/table_lib.sh:
# /bin/sh has no pipefail, so no benchmark pipes a table into sed).
# usage: bench_tables.sh SOURCE_DIR
top=$1
command -v python3 >/dev/null 2>&1 || { echo "python3 not found: skipped"; exit 77; }
. "$(dirname "$0")/check_lib.sh"

# FILE FIRST SKIP N: a --compare run's JSON of N steps from step FIRST, the
# three schedules taking turns; the first round's steps take 1000 ms, the
# k-th step of a schedule after it 10 k + 100 s ms (s: 0 no-prefetch, 1
# prefetch, 2 legacy); every other figure is 1 ms
compare_json() {
  awk -v first="$2" -v skip="$3" -v n="$4" 'BEGIN {
    split("no_prefetch prefetch legacy", name, " ")
    printf "{\"runs\": {"
    for (s = 0; s < 3; s++) {
      printf "%s\"%s\": {\"first_step\": %d, \"steps\": [", s ? ", " : "", name[s + 1], first
      c = 0; k = 0
      for (i = s; i < n; i += 3) {
        ms = i < skip ? 1000 : 10 * (++k) + 100 * s
        printf "%s{\"step\": %d, \"step_ms\": %d, \"exposed_gather_ms\": 1, \"reduce_wait_ms\": 1, " \
               "\"a2a_ms\": 1, \"compute_ms\": 1, \"cpu_ms\": 1, \"sys_ms\": 1, " \
               "\"compute_cpu_ms\": 1}", c++ ? ", " : "", first + i, ms
      }
      printf "], \"summary\": {\"warmup_steps_skipped\": %d, \"steps_counted\": %d}}", skip, k
    }
    printf "}}\n" }' >"$1"
}
table() { python3 "$top/bench/overlap_table.py" "$@" >"$dir/out" 2>"$dir/err"; }
# NAME FILE ROW...: the table of FILE has rows starting with each ROW
rows() {
  name=$1 file=$2
  shift 2
  good=1
  table "$file" || good=0
  for r in "$@"; do
    grep -qF "$r" "$dir/out" || good=0
  done
  if [ "$good" = 1 ]; then ok "$name"; else bad "$name: $(cat "$dir/out" "$dir/err")"; fi
}

# 9 steps: each schedule's first in the warm-up round, two kept
compare_json "$dir/c9.json" 0 3 9
rows "9 steps: two of each schedule kept, the warm-up round's left out" "$dir/c9.json" \
  "| no-prefetch | 2 | 15.0 [12.5-17.5] |" "| prefetch | 2 | 115.0 [112.5-117.5] |" \
  "| legacy | 2 | 215.0 [212.5-217.5] |"
# a resumed run (its steps numbered from 100), 7 steps: 2, 1 and 1 kept
compare_json "$dir/r7.json" 100 3 7
rows "a resumed run of 7 steps: 2, 1 and 1 kept" "$dir/r7.json" \
  "| no-prefetch | 2 | 15.0 [12.5-17.5] |" "| prefetch | 1 | 110.0 [110.0-110.0] |" \
  "| legacy | 1 | 210.0 [210.0-210.0] |"
# 2 steps: nothing of legacy (one line, exit 1, no traceback)
compare_json "$dir/c2.json" 0 0 2
table "$dir/c2.json"
rc=$?
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
   grep -q "^overlap_table.py: legacy: no step after the warm-up round" "$dir/err"; then
  ok "a schedule without steps: $(cat "$dir/err")"
else
  bad "a schedule without steps: exit $rc, $(cat "$dir/err")"
fi
# a failing table ends the benchmark: its status, the rows before it
# indented, nothing after it
cat >"$dir/bench.sh" <<EOS
set -eu
. "$top/bench/table_lib.sh"
indented sh -c 'echo row; exit 3'
echo after
EOS
sh "$dir/bench.sh" >"$dir/out" 2>"$dir/err"
rc=$?
if [ "$rc" -eq 3 ] && [ "$(cat "$dir/out")" = "   row" ] && grep -q "'sh' failed (exit 3)" "$dir/err"; then
  ok "a failing table ends the benchmark with its status"
else
  bad "a failing table: exit $rc, out '$(cat "$dir/out")', err '$(cat "$dir/err")'"
fi
sh -c ". '$top/bench/table_lib.sh'; indented python3 '$top/bench/overlap_table.py' '$dir/c2.json'" \
  >"$dir/out" 2>"$dir/err"
rc=$?
if [ "$rc" -eq 1 ]; then
  ok "overlap_table.py's failure ends the benchmark: exit 1"
else
  bad "overlap_table.py's failure: exit $rc"
fi
# bench/trace_steps.py on a hand-made trace of two steps (10 and 1.5 ms):
# the gap before a compute span, gathers issued within 2 ms of each other
# in one batch, the default step the median after the first
cat >"$dir/trace.json" <<'JSON'
{"traceEvents": [
 {"ph": "X", "pid": 0, "tid": 0, "name": "embed", "ts": 0, "dur": 1000},
 {"ph": "X", "pid": 0, "tid": 1, "name": "AG a", "ts": 100, "dur": 1000},
 {"ph": "X", "pid": 0, "tid": 1, "name": "AG b", "ts": 1500, "dur": 3000},
 {"ph": "X", "pid": 0, "tid": 0, "name": "fwd L0", "ts": 5000, "dur": 2000},
 {"ph": "X", "pid": 0, "tid": 1, "name": "AG c", "ts": 6000, "dur": 100},
 {"ph": "X", "pid": 0, "tid": 0, "name": "embed", "ts": 10000, "dur": 500},
 {"ph": "X", "pid": 0, "tid": 0, "name": "fwd L0", "ts": 10500, "dur": 1000}]}
JSON
steps() { python3 "$top/bench/trace_steps.py" "$dir/trace.json" "$@" >"$dir/out" 2>"$dir/err"; }
if steps --step 0 && grep -q "step 0 of 2: 10.0 ms" "$dir/out" &&
   grep -Eq "^  compute +5\.0 +2\.0 +after a gap of +4\.0  fwd L0$" "$dir/out" &&
   grep -Eq "^  gathers +0\.1 to +4\.5 +2 ops, first AG a$" "$dir/out" &&
   grep -Eq "^  gathers +6\.0 to +6\.1 +1 ops, first AG c$" "$dir/out"; then
  ok "trace_steps.py: gaps and batches of a step"
else
  bad "trace_steps.py --step 0: $(cat "$dir/out" "$dir/err")"
fi
if steps && grep -q "step 1 of 2: 1.5 ms" "$dir/out"; then
  ok "trace_steps.py: the median step after the first by default"
else
  bad "trace_steps.py's default step: $(cat "$dir/out" "$dir/err")"
fi
steps --pid 3
rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] && grep -q "no spans for pid 3" "$dir/err"; then
  ok "trace_steps.py: a row without spans, one line, exit 1"
else
  bad "trace_steps.py --pid 3: exit $rc, $(cat "$dir/err")"
fi
# no benchmark pipes a table into sed (the pipe's status would be sed's)
if grep -n "| *sed 's/^/   /'" "$top"/bench/*.sh >"$dir/pipes"; then
  bad "tables piped into sed: $(cat "$dir/pipes")"
else
  ok "no table piped into sed"
fi
summary
