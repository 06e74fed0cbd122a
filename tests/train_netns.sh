#!/bin/sh
# smoe train across "hosts": two network namespaces joined by a bridge
# (scripts/netns.sh), two ranks each, TCP between the hosts and shared
# memory inside. The losses and parameters equal the single-host run;
# smoe sim --calibrate tells the hosts apart and, on the training's mesh,
# times the cross-host gathers as training issues them (a layer's at once),
# on another mesh keeps its one-weight sweep; and cutting one host's link
# mid-run ends the job with a clear error within 30 s (with the progress
# thread, on by default across hosts). The thread on and off, and a
# resume with it, are bitwise the same. Needs root, iproute2 and Open MPI's mpirun; exits 77 (skipped)
# without them.
# usage: train_netns.sh MPIEXEC SMOE CMP_RUNS
mpiexec=$1
smoe=$2
cmp=$3
top=$(cd "$(dirname "$0")/.." && pwd)
netns="$top/scripts/netns.sh"
# namespaces of this run alone: a concurrent run (another checkout) uses others
export SMOE_NETNS="sm$$"
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! command -v unshare >/dev/null ||
  ! "$mpiexec" --version 2>/dev/null | grep -Eq "Open MPI|OpenRTE"; then
  echo "skip: needs root, iproute2, unshare and Open MPI"
  exit 77
fi
. "$top/tests/runs_lib.sh" # $dir, the counts, check, summary
cleanup() {
  "$netns" down 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
if ! "$netns" up 2 >"$dir/up.err" 2>&1; then
  echo "skip: cannot create network namespaces: $(head -1 "$dir/up.err")"
  exit 77
fi
export OPENBLAS_NUM_THREADS=1
# the suite's OpenBLAS core (tests/CMakeLists.txt), when it names one
xcore=${OPENBLAS_CORETYPE:+-x OPENBLAS_CORETYPE}
args="--steps 4 --quiet --json ici_expert_parallelism=2"

# fsdp=2 crosses the hosts, expert=2 stays inside each
timeout 180 "$mpiexec" -n 4 "$smoe" train $args --dump-params "$dir/one.bin" \
  >"$dir/one.json" 2>"$dir/one.err"
timeout 180 "$netns" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
  -x OPENBLAS_NUM_THREADS $xcore -x SMOE_CONFIG_DIR "$smoe" train $args \
  --dump-params "$dir/two.bin" >"$dir/two.json" 2>"$dir/two.err"
rc=$?
if [ "$rc" -eq 0 ] && "$cmp" "$dir/one.json" "$dir/one.bin" "$dir/two.json" "$dir/two.bin" 1e-5 \
  >"$dir/cmp.out" 2>&1; then
  pass=$((pass + 1))
  echo "ok: 2 hosts x 2 ranks == 1 host x 4 ranks: $(grep worst "$dir/cmp.out")"
else
  fail=$((fail + 1))
  echo "FAIL: 2 hosts x 2 ranks (exit $rc) vs 1 host:" >&2
  tail -5 "$dir/two.err" "$dir/cmp.out" >&2
fi

# the progress thread: on by default across hosts; off (--no-progress-thread)
# bitwise the same; a run stopped at step 2 and resumed with the thread on
# bitwise the uninterrupted one; at MPI_THREAD_FUNNELED (the test hook) the
# default turns it off and says why
net() { # NAME ARGS...: a 2-host run into $dir/NAME.{json,bin,err}
  n=$1
  shift
  timeout 180 "$netns" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
    -x OPENBLAS_NUM_THREADS $xcore -x SMOE_CONFIG_DIR -x SMOE_TEST_MPI_THREAD "$smoe" train $args \
    --dump-params "$dir/$n.bin" "$@" >"$dir/$n.json" 2>"$dir/$n.err"
}
SMOE_TEST_MPI_THREAD=multiple # what smoe asks anyway (-x needs it set)
export SMOE_TEST_MPI_THREAD
grep -q '"progress_thread":[[:space:]]*"on (2 hosts)"' "$dir/two.json"
check $? "the progress thread is on by default across 2 hosts"
net nopt --no-progress-thread && "$cmp" "$dir/two.json" "$dir/two.bin" "$dir/nopt.json" \
  "$dir/nopt.bin" 0 >"$dir/cmp.out" 2>&1 && grep -q '"progress_thread":[[:space:]]*"off (as asked)"' "$dir/nopt.json"
check $? "--no-progress-thread across hosts == the default (thread on), bitwise"
# the thread's priority raised above the compute's (root may; another user
# is told why not), none without a thread
want='"(nice -10|not raised \([^)]*\))"'
[ "$(id -u)" = 0 ] && want='"nice -10"'
grep -Eq "\"progress_thread_priority\":[[:space:]]*$want" "$dir/two.json" &&
  grep -q '"progress_thread_priority":[[:space:]]*null' "$dir/nopt.json"
check $? "the progress thread's priority: $(grep -o '"progress_thread_priority":[^,}]*' "$dir/two.json" | head -1), none without the thread"
# (the schedule's length fixed to the whole run's 4 steps, which is what
# the uninterrupted run's default is)
net half --steps 2 learning_rate_schedule_steps=4 --checkpoint-dir "$dir/ck" &&
  net res learning_rate_schedule_steps=4 --checkpoint-dir "$dir/ck" --resume && "$cmp" "$dir/two.json" "$dir/two.bin" \
  "$dir/res.json" "$dir/res.bin" 0 >"$dir/cmp.out" 2>&1
check $? "checkpoint at step 2 and resume across hosts with the thread == uninterrupted, bitwise"
SMOE_TEST_MPI_THREAD=funneled
net fun && grep -q '"progress_thread":[[:space:]]*"off (2 hosts, but the library provides only MPI_THREAD_FUNNELED)"' \
  "$dir/fun.json" && "$cmp" "$dir/two.json" "$dir/two.bin" "$dir/fun.json" "$dir/fun.bin" 0 \
  >"$dir/cmp.out" 2>&1
check $? "at MPI_THREAD_FUNNELED the default runs without the thread, bitwise the same"
# HSDP across the hosts: a slice per host (--slices 2,
# dcn_data_parallelism=2), fsdp=2 within each, the weights replicated
# across them: the same numbers as on one host; a step's gathers stay
# within the hosts and only the gradient all-reduces cross, each rank
# sending its parameter shard's bytes over the link (a 2-member
# all-reduce: its buffer, whatever MPI's algorithm), fewer than flat
# fsdp=4 across the same hosts sends
SMOE_TEST_MPI_THREAD=multiple
# HSDP and two-level gathers, a slice per host, against the single-rank
# run (the global batch of 4 ranks x 4 sequences); the bytes each step
# sends across the link are the plan's count (smoe plan --slices)
timeout 180 "$smoe" train --steps 4 --quiet --json per_device_batch_size=16 \
  --dump-params "$dir/ref.bin" >"$dir/ref.json" 2>"$dir/ref.err"
plan_link() { # the plan's bytes across slices per step and device
  "$smoe" plan --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 "$@" |
    sed -n 's/.*co-axis: bytes a device sends across slices per step of smoe train: \([0-9]*\).*/\1/p'
}
links() { grep '"link_bytes"' "$dir/$1.json" | tr -dc '0-9\n' | sort -u | tr '\n' ' '; }
H="--slices 2 dcn_data_parallelism=2 ici_expert_parallelism=1"
net hsdp $H && "$cmp" "$dir/ref.json" "$dir/ref.bin" "$dir/hsdp.json" "$dir/hsdp.bin" 1e-5 \
  >"$dir/cmp.out" 2>&1
check $? "HSDP, a slice per host == single rank: $(grep worst "$dir/cmp.out" | head -1)"
grep -q '"slices":[[:space:]]*"2 slices, one per host"' "$dir/hsdp.json"
check $? "HSDP: $(sed -n 's/.*"slices":[[:space:]]*"\([^"]*\)".*/\1/p' "$dir/hsdp.json")"
# the parameter bytes of a rank (its tracked parameters class)
pbytes=$(awk '/"peak_tracked":/ { f = 1 } f && /"params":/ { v = $0; gsub(/[^0-9]/, "", v);
  print v; exit }' "$dir/hsdp.json")
hl=$(links hsdp) hp=$(plan_link $H)
check "$([ -n "$pbytes" ] && [ "$hl" = "$pbytes " ] && [ "$hp" = "$pbytes" ] && echo 0 || echo 1)" \
  "HSDP: every step sends a rank's parameter bytes across hosts ($pbytes), as the plan counts ($hp): $hl"
T="--slices 2 dcn_fsdp_parallelism=2 ici_expert_parallelism=1"
net two $T && "$cmp" "$dir/ref.json" "$dir/ref.bin" "$dir/two.json" "$dir/two.bin" 1e-5 \
  >"$dir/cmp.out" 2>&1
check $? "two-level gathers (fsdp across 2 hosts) == single rank: $(grep worst "$dir/cmp.out" | head -1)"
tl=$(links two) tp=$(plan_link $T)
check "$([ -n "$tp" ] && [ "$tl" = "$tp " ] && echo 0 || echo 1)" \
  "two-level: every step sends the plan's count across hosts ($tp): $tl"
net flat ici_fsdp_parallelism=4 ici_expert_parallelism=1
flat=$(grep '"link_bytes"' "$dir/flat.json" | tr -dc '0-9\n' | sort -n | tail -1)
check "$([ -n "$flat" ] && [ -n "$pbytes" ] && [ -n "$tp" ] && [ "$pbytes" -lt "$flat" ] &&
  [ "$tp" -le "$flat" ] && echo 0 || echo 1)" \
  "HSDP ($pbytes) and two-level ($tp) send fewer bytes across hosts per step than flat fsdp=4 ($flat)"

unset SMOE_TEST_MPI_THREAD

# the calibration across the hosts: on the training's mesh (fsdp = hosts,
# expert = ranks per host) the dcn figures come from a layer's gathers, the
# reductions' own (dcn_reduce_*) from its reductions, and the cores' part of
# their time (gather_core_fraction, in (0, 1]) from the ranks' CPU time, and
# where the two together took longer, the link they share
# (dcn_link_bandwidth, with its note); the ici figures from the same
# layer's gathers within each host (no ici_reduce_*: those reductions would
# cross the link); on fsdp=4 (not the calibration's hosts x ranks) all from
# the one-weight sweep.
# The first calibrates by default, which across hosts is with the progress
# thread, as smoe train's default (progress: thread, which the simulator
# predicts); the second with --no-progress-thread (progress: calls), which
# the simulator refuses across hosts in one line
for mesh in ici_expert_parallelism=2 ici_fsdp_parallelism=4; do
  pth="" mode=thread
  [ "$mesh" = ici_fsdp_parallelism=4 ] && pth=--no-progress-thread mode=calls
  timeout 300 "$netns" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
    -x OPENBLAS_NUM_THREADS $xcore -x SMOE_CONFIG_DIR "$smoe" sim --calibrate $pth --out "$dir/hw.yml" \
    "$mesh" >"$dir/cal.out" 2>&1
  rc=$?
  lat=$(sed -n 's/^dcn_latency: *\([^ ]*\).*/\1/p' "$dir/hw.yml" 2>/dev/null)
  bw=$(sed -n 's/^dcn_bandwidth: *\([^ ]*\).*/\1/p' "$dir/hw.yml" 2>/dev/null)
  want="one rank per host" red=0
  [ "$mesh" = ici_expert_parallelism=2 ] && want="a layer's gathers started together" red=1
  # the reductions' own figures only from a layer's (on the training's mesh)
  redok=0
  rbw=$(sed -n 's/^dcn_reduce_bandwidth: *\([^ ]*\).*/\1/p' "$dir/hw.yml" 2>/dev/null)
  if [ "$red" = 1 ]; then
    cf=$(sed -n 's/^gather_core_fraction: *\([^ ]*\).*/\1/p' "$dir/hw.yml" 2>/dev/null)
    grep -q "^dcn_reduce_bandwidth:.*reductions enqueued together" "$dir/hw.yml" &&
      grep -q "^# dcn_step_bytes [1-9][0-9]*:" "$dir/hw.yml" &&
      grep -q "^ici_bandwidth:.*a layer's gathers started together" "$dir/hw.yml" &&
      grep -q "^# ici_step_bytes [1-9][0-9]*:" "$dir/hw.yml" &&
      ! grep -q "^ici_reduce_bandwidth:" "$dir/hw.yml" &&
      { ! grep -q "^dcn_link_bandwidth:" "$dir/hw.yml" ||
        grep -q "^dcn_link_bandwidth:.*the same gathers and reductions at once" "$dir/hw.yml"; } &&
      awk -v b="$rbw" -v c="$cf" 'BEGIN { exit !(b + 0 > 0 && b + 0 < 1e300 && c + 0 > 0 &&
                                               c + 0 <= 1) }' && redok=1
  else
    [ -z "$rbw" ] && ! grep -q "^gather_core_fraction:" "$dir/hw.yml" &&
      ! grep -q "^dcn_link_bandwidth:" "$dir/hw.yml" &&
      ! grep -q "^# ici_step_bytes" "$dir/hw.yml" && redok=1
  fi
  "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 4 "$mesh" \
    --hardware "$dir/hw.yml" --json >"$dir/sim.json" 2>"$dir/sim.err"
  src=$?
  if [ "$mode" = thread ]; then simok=$((src == 0)); else
    simok=$((src == 2 && $(wc -l <"$dir/sim.err") == 1))
    grep -q "progress 'calls' with gathers across hosts is not modelled" "$dir/sim.err" || simok=0
  fi
  if [ "$rc" -eq 0 ] && grep -q '^# 2 host(s) of 2 rank(s)' "$dir/hw.yml" &&
    grep -q "^progress: $mode\$" "$dir/hw.yml" &&
    grep '^dcn_bandwidth:' "$dir/hw.yml" | grep -q "$want" &&
    awk -v l="$lat" -v b="$bw" 'BEGIN { exit !(l + 0 >= 0 && l + 0 < 10 && b + 0 > 0 && b + 0 < 1e300) }' &&
    [ "$simok" = 1 ] && [ "$redok" = 1 ]; then
    pass=$((pass + 1))
    echo "ok: calibrate on 2 hosts, $mesh, progress $mode: dcn_latency $lat s, dcn_bandwidth $bw B/s ($want), dcn_reduce_bandwidth ${rbw:-none}; sim exit $src"
  else
    fail=$((fail + 1))
    echo "FAIL: calibrate on 2 hosts, $mesh, progress $mode (exit $rc, sim exit $src):" >&2
    grep -E 'host|dcn_|progress' "$dir/hw.yml" >&2
    tail -5 "$dir/cal.out" "$dir/sim.err" >&2
  fi
done

# cut host 2's link after a few steps: no hang, a clear message
timeout 120 "$netns" mpirun --bind-to none --host 10.99.0.1:2,10.99.0.2:2 -np 4 \
  -x OPENBLAS_NUM_THREADS $xcore -x SMOE_CONFIG_DIR "$smoe" train --steps 1000 \
  ici_expert_parallelism=2 --comm-timeout 5 >"$dir/cut.out" 2>&1 &
job=$!
i=0
while [ $i -lt 600 ] && ! grep -q "step  *3/" "$dir/cut.out"; do
  sleep 0.1
  i=$((i + 1))
done
t0=$(date +%s)
"$netns" link 2 down
wait "$job"
rc=$?
took=$(($(date +%s) - t0))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le 30 ] &&
  grep -Eq "smoe: rank [0-9]: (no progress for 5 s waiting for .* during step [0-9]+|MPI error in)" "$dir/cut.out"; then
  pass=$((pass + 1))
  echo "ok: link cut -> exit $rc after ${took}s: $(grep -m1 '^smoe: rank' "$dir/cut.out" | cut -c1-160)"
else
  fail=$((fail + 1))
  echo "FAIL: link cut -> exit $rc after ${took}s" >&2
  tail -12 "$dir/cut.out" >&2
fi
summary
