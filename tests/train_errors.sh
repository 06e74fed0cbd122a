#!/bin/sh
# Bad input to smoe train under mpirun: one clear line from rank 0, every
# rank exits non-zero, no hang (each run under a timeout). SMOE is the
# smoe_testhooks build (its MPI thread-level hook).
# usage: train_errors.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
err=$tmp/err

# WANT NP PATTERN ARGS...: WANT is the exit status, or "any" (non-zero,
# not the timeout's)
check_run() {
  want=$1
  np=$2
  pattern=$3
  shift 3
  timeout 60 "$mpiexec" -n "$np" "$smoe" train --steps 2 --quiet "$@" >/dev/null 2>"$err"
  rc=$?
  lines=$(grep -c '^smoe:' "$err")
  if [ "$want" = any ]; then ok_rc=$([ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo 1); else
    ok_rc=$([ "$rc" -eq "$want" ] && echo 1); fi
  if [ -n "$ok_rc" ] && [ "$lines" -eq 1 ] && grep -Eq "^smoe: $pattern" "$err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: np $np smoe train $* -> exit $rc (want $want), $lines smoe line(s):" >&2
    sed 's/^/    /' "$err" | head -8 >&2
    echo "    expected: $pattern" >&2
  fi
}
expect() { check_run any "$@"; } # NP PATTERN ARGS...
refused() { check_run 2 "$@"; } # NP PATTERN ARGS...

# The library's refusals (the mesh, the data file, values, unimplemented
# MaxText keys) are test_train_errors, in process, with the same messages;
# here the refusals the CLI itself makes, and one of the library's per kind
# through mpirun (rank 0 alone prints, every rank exits).
expect 4 "argument '--max-memory 1M': the plan needs [0-9]+ bytes per rank" --max-memory 1M ici_expert_parallelism=2
# the same byte-count forms as sim --hbm-budget (one parser)
expect 1 "argument '--max-memory 1MB': the plan needs [0-9]+ bytes per rank" --max-memory 1MB
expect 1 "argument '--max-memory 1Q': expected a byte count" --max-memory 1Q
expect 4 "argument '--gather bogus': expected coaxis or legacy" --gather bogus
refused 2 "argument '--compare-exchange': cannot be combined with --compare" --compare-exchange --compare
refused 2 "argument '--compare-exchange': ring of experts differs from the all-to-all only" \
  --compare-exchange ici_expert_parallelism=1
refused 2 "argument 'use_ring_of_experts=true': is set by --compare-exchange" \
  --compare-exchange use_ring_of_experts=true
expect 1 "argument '--steps 0': expected a positive integer" --steps 0
expect 1 "argument '--devices': is set by the number of MPI ranks" --devices 4
expect 4 "4 MPI ranks: the mesh has 3 devices" ici_fsdp_parallelism=3
# slices whose ranks MaxText's multi-slice order would interleave; a slice
# count the ranks do not split into
refused 4 "argument '--slices': MaxText's multi-slice device order .* interleaves" --slices 2 \
  ici_data_parallelism=2 ici_fsdp_parallelism=1 dcn_fsdp_parallelism=2
expect 4 "4 MPI ranks, 3 slices: 4 devices cannot be split into 3 equal slices" --slices 3
expect 2 "/dev/zero: the data file is a device, not a regular file" --data /dev/zero
refused 2 "argument 'dropout_rate=0.1': dropout_rate: smoe train implements only dropout_rate: 0" \
  dropout_rate=0.1
# both progress-thread flags: refused rather than the last one winning
refused 2 "argument '--no-progress-thread': contradicts the other progress-thread option" \
  --progress-thread --no-progress-thread
# --progress-thread on a library below MPI_THREAD_SERIALIZED (the test hook
# asks MPI_Init_thread for less than smoe does): refused with one line;
# without the flag (the default) the run goes on without a thread
for lv in single funneled; do
  LV=$(echo "$lv" | tr a-z A-Z)
  export SMOE_TEST_MPI_THREAD=$lv
  check_run 2 2 "argument '--progress-thread': the MPI library \(.*\) provides thread level MPI_THREAD_$LV; a progress thread needs MPI_THREAD_SERIALIZED" --progress-thread
  if timeout 60 "$mpiexec" -n 2 "$smoe" train --steps 1 >"$tmp/out" 2>"$err" &&
    grep -q '^progress thread: off (one host)$' "$tmp/out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: the default run at MPI_THREAD_$LV:" >&2
    tail -3 "$err" "$tmp/out" >&2
  fi
  unset SMOE_TEST_MPI_THREAD
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
