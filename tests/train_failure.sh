#!/bin/sh
# Failures of a running job: ranks started with different settings, a rank
# killed mid-step, a rank that stops answering. Each must end the whole job
# with a non-zero exit and a message naming the rank (and the phase),
# within 30 s; never a hang.
# usage: train_failure.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/out

ok() { pass=$((pass + 1)); }
bad() {
  fail=$((fail + 1))
  echo "FAIL: $1" >&2
  sed 's/^/    /' "$out" | head -12 >&2
}

# MPMD: rank 1 gets something else than rank 0
mismatch() { # PATTERN ARGS-OF-RANK-1...
  pattern=$1
  shift
  timeout 60 "$mpiexec" -n 1 "$smoe" train --steps 2 --quiet : \
    -n 1 "$smoe" train --steps 2 --quiet "$@" >"$out" 2>&1
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -Eq "^smoe: rank 1 runs a different $pattern" "$out"; then
    ok
  else
    bad "mismatch $* -> exit $rc, expected 'rank 1 runs a different $pattern'"
  fi
}
mismatch "configuration" learning_rate=0.01
mismatch "set of run options" --seed 7
mismatch "training data file" --data "$0"
# an error on rank 1 alone: rank 0 prints rank 1's message
timeout 60 "$mpiexec" -n 1 "$smoe" train --steps 2 --quiet : \
  -n 1 "$smoe" train --steps 2 --quiet --data /nonexistent/data.txt >"$out" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "^smoe: /nonexistent/data.txt: cannot open the data file" "$out"; then
  ok
else
  bad "data file missing on rank 1 only -> exit $rc, expected rank 1's message"
fi

# the pid of rank $1 of the job whose launcher is $2 (Open MPI or MPICH
# launch environment): only among that job's descendants, so a job of a
# concurrent test run is never touched
descendants() {
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}
rank_pid() {
  for p in $(descendants "$2"); do
    if tr '\0' '\n' </proc/"$p"/environ 2>/dev/null |
      grep -Eqx "(OMPI_COMM_WORLD_RANK|PMI_RANK)=$1"; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# a 4-rank job; after it runs steps, send SIGNAL to rank 2. Every job writes
# a file of its own, created empty before the job starts, so a wait can only
# see this job's lines; the rank's pid is looked up until it shows (a loaded
# machine may take a while), within a generous bound.
hits=0
hit() { # SIGNAL PATTERN [PATTERN2] ARGS...: every pattern must match
  sig=$1
  pattern=$2
  shift 2
  pattern2=.
  case "${1:-}" in
  -*) ;;
  ?*) pattern2=$1; shift ;;
  esac
  hits=$((hits + 1))
  out=$tmp/hit$hits
  : >"$out"
  timeout 600 "$mpiexec" -n 4 "$smoe" train --steps 1000 "$@" >"$out" 2>&1 &
  job=$!
  pid=
  i=0
  # a generous liveness bound: a loaded machine may take minutes to start 4 ranks
  while [ $i -lt 3000 ] && ! grep -q "step  *3/" "$out"; do
    sleep 0.1
    i=$((i + 1))
  done
  i=0
  while [ $i -lt 100 ] && ! pid=$(rank_pid 2 "$job"); do
    sleep 0.1
    i=$((i + 1))
  done
  if [ -z "$pid" ]; then
    kill "$job" 2>/dev/null
    wait "$job"
    bad "$sig: could not find rank 2 (waited $((i / 10)) s after step 3 was $(grep -q "step  *3/" "$out" && echo seen || echo "not seen"))"
    return
  fi
  t0=$(date +%s)
  kill -"$sig" "$pid"
  wait "$job"
  rc=$?
  took=$(($(date +%s) - t0))
  [ "$sig" = STOP ] && kill -KILL "$pid" 2>/dev/null
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le 30 ] && grep -Eq "$pattern" "$out" &&
    grep -Eq "$pattern2" "$out"; then
    ok
  else
    bad "$sig rank 2 -> exit $rc after ${took}s, expected /$pattern/ and /$pattern2/"
  fi
}
# the launcher sees the death and tears the job down. Open MPI names the
# rank and sends SIGTERM first, so the others say where they were; MPICH's
# hydra names the dead process by PID and SIGKILLs the others at once.
if "$mpiexec" --version 2>/dev/null | grep -q HYDRA; then
  hit KILL "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
else
  hit KILL "process rank 2 .*exited on signal 9" "smoe: rank [013]: terminated during step [0-9]+: "
fi
# a rank that hangs (stopped): the others' watchdog ends the job
hit STOP "smoe: rank [013]: no progress for 3 s waiting for .* during step [0-9]+" --comm-timeout 3
# the same two with the progress thread (on by default across hosts)
if ! "$mpiexec" --version 2>/dev/null | grep -q HYDRA; then
  hit KILL "process rank 2 .*exited on signal 9" "smoe: rank [013]: terminated during step [0-9]+: " \
    --progress-thread
fi
hit STOP "smoe: rank [013]: no progress for 3 s waiting for .* during step [0-9]+" --comm-timeout 3 \
  --progress-thread

# an error inside a step on one rank (test hook): the whole job ends at
# once with that rank's message, not after the peers' watchdog
out=$tmp/step-error
for pt in --no-progress-thread --progress-thread; do
  t0=$(date +%s)
  SMOE_TEST_STEP_ERROR=3 timeout 60 "$mpiexec" -n 4 "$smoe" train $pt \
    --steps 100 --quiet --comm-timeout 60 ici_expert_parallelism=2 >"$out" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -le 30 ] &&
    grep -q "^smoe: rank 3: step 3: an error injected by the step_error test hook" "$out" &&
    ! grep -q "no progress for" "$out"; then
    ok
  else
    bad "an error in step 3 on rank 3 ($pt) -> exit $rc after ${took}s, expected rank 3's message"
  fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
