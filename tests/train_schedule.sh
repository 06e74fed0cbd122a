#!/bin/sh
# The prefetch schedule as data, from smoe sim to smoe train, and the
# memory budget. Oracles: the depth-1 run (every schedule trains bitwise
# the same: gathers are exact copies, only their timing differs); the
# runs' own tracked peaks (depth 0 and depth 2 bracket the budget); the
# budget itself.
#  - depths 0..4 and 8 in train (the tiny model has 8 units: depth 8
#    prefetches the whole step), bitwise equal to depth 1;
#  - schedules written by `smoe sim --schedule-out` (depths 3, 5..8, a
#    budgeted whole-weight plan) run by `smoe train --schedule`, several
#    taking turns in one run: bitwise equal to depth 1 (and so to
#    `--prefetch-depth D` directly);
#  - `--hbm-budget B` with B halfway between the depth-0 and depth-2 peaks:
#    its tracked peak <= B < the depth-2 peak, no gather past the budget,
#    bitwise the same numerics, fewer gathers left for their layer to
#    issue than without prefetch (a count, so a loaded machine cannot flip
#    it; the exposed wait in ms is compared only with a generous margin,
#    as a liveness bound: on this shared machine a step's timing can move
#    by tens of ms);
#  - one memory model: smoe sim's runtime executor against the runs'
#    tracked peaks, class by class, at depths 0..4 on 4 ranks (expert
#    parallelism) and on 2 (FSDP alone), at depths 0 and 4 on 2 ranks of
#    expert parallelism alone, and for the budget run's schedule:
#    parameters, gradients, optimizer and gathered bytes equal;
#    activations equal on 2 ranks; with expert parallelism equal at the
#    run's start (smoe_train_act_bytes), so the run's are at least the
#    sim's (the tolerance: skewed routing grows the routed-row stores
#    during the run, which no step model can know ahead); the budget
#    planner plans against the budget itself (no shift in its note);
#  - several schedule files taking turns in one run (repeated --schedule):
#    bitwise depth 1, one JSON run per file;
#  - bad schedule files and flags: one line naming the file and the field,
#    exit 2.
# usage: train_schedule.sh MPIEXEC SMOE CMP_RUNS TEST_DATA
mpiexec=$1
smoe=$2
cmp=$3
data=$4
steps=3
hw="$data/hardware/cpu-mpi.yml"
M="ici_expert_parallelism=2"

. "$(dirname "$0")/runs_lib.sh"

# the last value of a numeric JSON member in a run's output (the summary's)
num() { sed -n "s/.*\"$2\":[[:space:]]*\([-0-9.e+]*\).*/\1/p" "$dir/$1.json" | tail -1; }

# exit 2 and one line naming what (refused() checks the line)
refused2() { # PATTERN ARGS...
  refused "$@"
  check "$([ "$rc" -eq 2 ] && echo 0 || echo 1)" "exit status 2 (got $rc)"
}

sim_out() { # FILE ARGS...: smoe sim --schedule-out FILE for the 4-rank run
  f=$1
  shift
  if "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 $M --remat none \
    --hardware "$hw" --schedule-out "$f" "$@" \
    >/dev/null 2>"$dir/sim.err"; then
    pass=$((pass + 1))
    echo "ok: smoe sim --schedule-out $*"
  else
    fail=$((fail + 1))
    echo "FAIL: smoe sim --schedule-out $*:" >&2
    cat "$dir/sim.err" >&2
  fi
}

# depths 0..4 and 8 by --prefetch-depth (each a run of its own: the
# memory checks below read their peaks)
must_run d1 4 --steps $steps $M --prefetch-depth 1
for d in 0 2 3 4 8; do
  must_run "d$d" 4 --steps $steps $M --prefetch-depth $d && same d1 "d$d" 0 "depth $d == depth 1, bitwise"
done

# schedules from smoe sim, several files taking turns step by step in one
# run (bench/budget_sim_train.sh): one JSON run per file, and the
# parameters bitwise those of depth 1, so each file's steps are bitwise
# depth 1's: sim's depths 3 and 8 and a budgeted whole-weight plan in one
# run, sim's depths 5, 6 and 7 in another
sim_out "$dir/sched3.json" --prefetch-depth 3
sim_out "$dir/sched8.json" --prefetch-depth 8
sim_out "$dir/schedb.json" --hbm-budget 34M --whole-weights
grep -q '"issue":[[:space:]]*-1' "$dir/schedb.json"
check $? "the budgeted plan prefetches"
for d in 5 6 7; do sim_out "$dir/sched$d.json" --prefetch-depth $d; done
turns() { # NAME FILE...: the files taking turns, bitwise depth 1
  n=$1
  shift
  set -- $(for f in "$@"; do echo "--schedule $dir/$f.json"; done)
  must_run "$n" 4 --steps $steps $M "$@" || return
  cmp -s "$dir/d1.bin" "$dir/$n.bin"
  check $? "$n: schedule files taking turns: parameters bitwise those of depth 1"
  k=0
  for f in "$@"; do
    case $f in --schedule) continue ;; esac
    grep -q "\"$f\":" "$dir/$n.json" && k=$((k + 1))
  done
  check "$([ "$k" = $(($# / 2)) ] && echo 0 || echo 1)" "$n: a JSON run per schedule file ($k of $(($# / 2)))"
}
turns multi sched3 schedb sched8
turns deep sched5 sched6 sched7
refused2 "argument '--schedule $dir/sched3.json': is given twice" 2 $M --steps 1 \
  --schedule "$dir/sched3.json" --schedule "$dir/sched3.json"
refused2 "argument '--schedule'.*not with --compare" 2 $M --steps 1 --compare \
  --schedule "$dir/sched3.json" --schedule "$dir/sched8.json"

# the budget: halfway between the no-prefetch and the depth-2 peaks
p0=$(num d0 peak_tracked_bytes)
p2=$(num d2 peak_tracked_bytes)
b=$(awk -v a="$p0" -v c="$p2" 'BEGIN { printf "%.0f", (a + c) / 2 }')
echo "tracked peaks: depth 0 $p0, depth 2 $p2; budget $b"
check "$(awk -v a="$p0" -v c="$p2" 'BEGIN { print (c > a) ? 0 : 1 }')" "depth 2 peak $p2 > depth 0 peak $p0"
if must_run bud 4 --steps $steps $M --hbm-budget "$b" --hardware "$hw"; then
  same d1 bud 0 "budget run, bitwise"
  pb=$(num bud peak_tracked_bytes)
  check "$(awk -v p="$pb" -v b="$b" 'BEGIN { print (p <= b) ? 0 : 1 }')" "budget run's peak $pb <= budget $b"
  check "$(awk -v p="$pb" -v c="$p2" 'BEGIN { print (c > p) ? 0 : 1 }')" "depth 2 peak $p2 > budget run's peak $pb"
  check "$([ "$(num bud budget_overruns)" = 0 ] && echo 0 || echo 1)" "no gather past the budget"
  u0=$(num d0 gathers_at_use)
  ub=$(num bud gathers_at_use)
  check "$(awk -v a="$u0" -v b="$ub" 'BEGIN { print (b < a) ? 0 : 1 }')" "gathers left to their layer: budget $ub < no prefetch $u0"
  e0=$(num d0 mean_exposed_gather_ms)
  eb=$(num bud mean_exposed_gather_ms)
  check "$(awk -v a="$e0" -v b="$eb" 'BEGIN { print (b <= 2 * a + 50) ? 0 : 1 }')" "exposed wait: budget $eb ms <= 2 x no prefetch $e0 ms + 50 ms"
  grep -q '"schedule":.*planned for' "$dir/bud.json"
  check $? "the summary says what the planner chose"
  grep -q '"schedule":.*as smoe sim counts' "$dir/bud.json"
  check "$([ $? -ne 0 ] && echo 0 || echo 1)" "the planner's note gives no shift"
fi

# one memory model: each class of the runs' tracked peaks against smoe
# sim's runtime row (its JSON's "prefetch" schedule) at the same depth
# CLASS FILE OBJ: the first value of CLASS after the object named OBJ
cls() { awk -v o="\"$3\":" -v k="\"$1\":" 'index($0, o) { f = 1 } f && index($0, k) {
  v = $0; sub(/.*:[[:space:]]*/, "", v); sub(/,.*/, "", v); print v; exit }' "$2"; }
# RUN NP SIM ROW WHAT [EP]: run RUN's classes (NP ranks) against smoe
# sim's ROW in $dir/SIM.json; with EP (expert parallelism) the run's
# activations at least the sim's, else equal
mem_same() {
  for c in params grads optimizer gathered; do
    t=$(cls $c "$dir/$1.json" peak_tracked)
    p=$(cls $c "$dir/$3.json" "$4")
    check "$([ -n "$t" ] && [ "$t" = "$p" ] && echo 0 || echo 1)" "$5 on $2 ranks, $c: train $t = sim $p"
  done
  t=$(cls activations "$dir/$1.json" peak_tracked)
  p=$(cls activations "$dir/$3.json" "$4")
  if [ -n "${6:-}" ]; then
    check "$(awk -v t="$t" -v p="$p" 'BEGIN { print (p > 0 && t >= p) ? 0 : 1 }')" \
      "$5 on $2 ranks, activations: train $t >= sim $p (routed-row stores grown)"
  else
    check "$([ -n "$t" ] && [ "$t" = "$p" ] && echo 0 || echo 1)" "$5 on $2 ranks, activations: train $t = sim $p"
  fi
}
sim_json() { # NAME NP ARGS...: smoe sim --json into $dir/NAME.json
  f=$1
  np=$2
  shift 2
  if "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices "$np" --remat none \
    --hardware "$hw" --json "$@" >"$dir/$f.json" 2>"$dir/sim.err"; then
    return 0
  fi
  fail=$((fail + 1))
  echo "FAIL: smoe sim --devices $np $* --json:" >&2
  cat "$dir/sim.err" >&2
  return 1
}
# 4 ranks with expert parallelism (the runs above), 2 ranks of FSDP alone,
# and 2 of expert parallelism alone (where the plan gathers nothing and
# smoe's executor gathers the non-expert weights over 'expert' at use)
for d in 0 1 2 3 4; do
  sim_json "simd$d" 4 $M --prefetch-depth $d && mem_same "d$d" 4 "simd$d" prefetch "depth $d" ep
  if must_run "r2d$d" 2 --steps 2 --prefetch-depth $d && sim_json "sim2d$d" 2 --prefetch-depth $d; then
    mem_same "r2d$d" 2 "sim2d$d" prefetch "depth $d"
  fi
done
for d in 0 4; do
  if must_run "e2d$d" 2 --steps 2 $M --prefetch-depth $d &&
    sim_json "sime2d$d" 2 $M --prefetch-depth $d; then
    mem_same "e2d$d" 2 "sime2d$d" prefetch "depth $d, expert parallelism alone," ep
  fi
done
if [ -f "$dir/bud.json" ] && sim_json simb 4 $M --hbm-budget "$b" --whole-weights; then
  mem_same bud 4 simb budgeted "budget $b" ep
fi
# one memory model for the gathered layers: depth 2 over depth 0 in smoe
# sim's prediction (the files' peak_bytes) and in the runs' tracked peaks
sim_out "$dir/sched0.json" --prefetch-depth 0
sim_out "$dir/sched2.json" --prefetch-depth 2
pk() { sed -n 's/.*"peak_bytes":[[:space:]]*\([-0-9.e+]*\).*/\1/p' "$dir/$1.json" | head -1; }
s0=$(pk sched0)
s2=$(pk sched2)
check "$(awk -v a="$p0" -v c="$p2" -v x="$s0" -v y="$s2" 'BEGIN { print (c - a == y - x && y > x) ? 0 : 1 }')" \
  "depth 2 adds the same bytes in smoe sim ($s0 -> $s2) and smoe train ($p0 -> $p2)"

# bad files and flags
printf 'not json' >"$dir/bad1.json"
refused2 "$dir/bad1.json:1:1: not JSON" 2 $M --steps 1 --schedule "$dir/bad1.json"
refused2 "$dir/missing.json: cannot open file" 2 $M --steps 1 --schedule "$dir/missing.json"
sed 's/"format":.*/"format": "other",/' "$dir/sched3.json" >"$dir/bad2.json"
refused2 "$dir/bad2.json: format" 2 $M --steps 1 --schedule "$dir/bad2.json"
awk '/"issue":/ && !done { sub(/-?[0-9]+/, "99"); done = 1 } { print }' "$dir/sched3.json" >"$dir/bad3.json"
refused2 "$dir/bad3.json: gathers\[0\]\.issue" 2 $M --steps 1 --schedule "$dir/bad3.json"
awk '/"unit":/ && !done { sub(/[0-9]+/, "1"); done = 1 } { print }' "$dir/sched3.json" >"$dir/bad4.json"
refused2 "$dir/bad4.json: gathers\[0\]\.(pass|layer|issue|unit)" 2 $M --steps 1 --schedule "$dir/bad4.json"
grep -v "\"chunk0\":" "$dir/sched3.json" >"$dir/bad5.json"
refused2 "$dir/bad5.json: gathers\[0\]\.chunk0" 2 $M --steps 1 --schedule "$dir/bad5.json"
# on cpu profiles smoe's executor makes memory step by whole layers (a
# prefetch frees a pool buffer for the gradients), so quarter chunks buy
# nothing there; an accelerator profile's planner splits weights
sim_out "$dir/schedq.json" --hbm-budget 34M --hardware h100
grep -q '"nchunks":[[:space:]]*[123],' "$dir/schedq.json"
check $? "the quarter-chunk plan splits a weight"
refused2 "(argument '--schedule'|$dir/schedq.json).*whole weights" 2 $M --steps 1 --schedule "$dir/schedq.json"
# the progress mode: a schedule (and a planner's profile) is predicted for
# the mode its profile was measured under (progress: calls | thread), and a
# run of the other mode is refused in one line, either way
grep -q '"progress":[[:space:]]*"calls"' "$dir/sched3.json"
check $? "a schedule from a profile without the key: progress calls"
sed 's/^kind: cpu$/kind: cpu\nprogress: thread/' "$hw" >"$dir/hw-thread.yml"
hw_saved=$hw
hw="$dir/hw-thread.yml"
sim_out "$dir/schedt.json" --prefetch-depth 1
hw=$hw_saved
refused2 "argument '--schedule $dir/schedt.json': predicted for progress 'thread'.*pass --progress-thread" \
  2 $M --steps 1 --schedule "$dir/schedt.json"
refused2 "argument '--schedule $dir/sched3.json': predicted for progress 'calls'.*calibrate with --progress-thread" \
  2 $M --steps 1 --schedule "$dir/sched3.json" --progress-thread
refused2 "argument '--hbm-budget' \(profile cpu-mpi\): predicted for progress 'thread'" \
  2 $M --steps 1 --hbm-budget 40M --hardware "$dir/hw-thread.yml"
sim_out "$dir/sched6.json" override_model_config=true base_num_decoder_layers=6
refused2 ".*layers: a schedule of 6 layers" 2 $M --steps 1 --schedule "$dir/sched6.json"
refused2 "argument '--schedule'.*one schedule" 2 $M --steps 1 --schedule "$dir/sched3.json" --compare
refused2 "argument '--schedule'.*--hbm-budget" 2 $M --steps 1 --schedule "$dir/sched3.json" --hbm-budget 1G --hardware "$hw"
refused2 "argument '--hbm-budget 12Q'" 2 $M --steps 1 --hbm-budget 12Q
refused2 "argument '--hbm-budget 1000000': leaves" 2 $M --steps 1 --hbm-budget 1000000 --hardware "$hw"
refused2 "argument '--hardware'.*only with --hbm-budget" 2 $M --steps 1 --hardware "$hw"
refused2 "argument '--prefetch-depth 65'.*0 to 64" 2 $M --steps 1 --prefetch-depth 65
refused2 "argument '--prefetch-depth'.*--schedule" 2 $M --steps 1 --schedule "$dir/sched3.json" --prefetch-depth 2
refused2 "argument '--prefetch-depth'.*--hbm-budget" 2 $M --steps 1 --hbm-budget 1G --hardware "$hw" --prefetch-depth 2
keep=$SMOE_CONFIG_DIR
export SMOE_CONFIG_DIR="$dir" # no cpu-mpi profile there
refused2 "argument '--hbm-budget'.*cpu-mpi profile $dir/hardware/cpu-mpi.yml" 2 $M --steps 1 --hbm-budget 1G
SMOE_CONFIG_DIR=$keep
refused2 "argument '--hardware $dir/nohw.yml'" 2 $M --steps 1 --hbm-budget 1G --hardware "$dir/nohw.yml"
# ranks given different schedules stop before step 1 (their gathers would not match)
timeout 120 "$mpiexec" -n 1 "$smoe" train --steps 1 --quiet --schedule "$dir/sched3.json" : \
  -n 1 "$smoe" train --steps 1 --quiet --schedule "$dir/sched8.json" >"$dir/mm.out" 2>&1
rc=$?
check "$([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q '^smoe: rank 1 runs a different prefetch schedule' "$dir/mm.out" && echo 0 || echo 1)" \
  "ranks with different schedules refused before step 1 (exit $rc)"
if "$smoe" sim --model tiny --devices 4 --hardware "$hw" --schedule-out /nonexistent/dir/s.json \
  >/dev/null 2>"$dir/err"; then
  rc=0
else
  rc=$?
fi
check "$([ "$rc" -ne 0 ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ] && grep -q "schedule-out" "$dir/err" && echo 0 || echo 1)" \
  "smoe sim --schedule-out into a missing directory: one line, exit $rc"

if [ -w /dev/full ]; then
  if "$smoe" sim --model tiny --devices 4 --hardware "$hw" --schedule-out /dev/full >/dev/null 2>"$dir/err"; then
    rc=0
  else
    rc=$?
  fi
  check "$([ "$rc" -ne 0 ] && [ "$(grep -c '^smoe:' "$dir/err")" -eq 1 ] && grep -q "/dev/full" "$dir/err" && echo 0 || echo 1)" \
    "smoe sim --schedule-out /dev/full: one line, exit $rc"
fi

# --compare with --trace: every step's spans in the order run (a step ends
# with its adamw span, 4 per rank); each step's CPU times (sums over ranks)
# present and not negative, the kernel part within the total and the
# training threads' CPU inside the model calls within theirs over the step
# (the same clock: accounting, not timing)
if timeout 180 "$mpiexec" -n 2 "$smoe" train --quiet --json --steps 4 --compare \
     --trace "$dir/ctrace.json" >"$dir/ctr.json" 2>"$dir/ctr.err"; then
  n0=$(grep -c '"name":"adamw","ph":"X","pid":0,' "$dir/ctrace.json")
  n1=$(grep -c '"name":"adamw","ph":"X","pid":1,' "$dir/ctrace.json")
  check "$([ "$n0" -eq 4 ] && [ "$n1" -eq 4 ] && echo 0 || echo 1)" \
    "--compare --trace: 4 steps' adamw spans per rank (got $n0, $n1)"
  for k in compute_cpu_ms cpu_ms sys_ms train_cpu_ms; do
    sed -n "s/.*\"$k\":[[:space:]]*\([-0-9.e+]*\).*/\1/p" "$dir/ctr.json" >"$dir/ctr.$k"
  done
  bad=$(paste "$dir/ctr.compute_cpu_ms" "$dir/ctr.cpu_ms" "$dir/ctr.sys_ms" "$dir/ctr.train_cpu_ms" |
    awk '{ n++; if (NF != 4 || $1 < 0 || $3 < 0 || $3 > $2 || $2 <= 0 || $1 > $4) b++ }
         END { print (n == 4 ? b + 0 : "count " n) }')
  check "$([ "$bad" = 0 ] && echo 0 || echo 1)" \
    "--compare: per-step CPU times (compute <= training thread, kernel <= process; bad: $bad)"
else
  check 1 "--compare --trace on 2 ranks: $(tail -1 "$dir/ctr.err")"
fi

summary
