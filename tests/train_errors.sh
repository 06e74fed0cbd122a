#!/bin/sh
# Bad input to smoe train under mpirun: one clear line from rank 0, every
# rank exits non-zero, no hang (each run under a timeout).
# usage: train_errors.sh MPIEXEC SMOE
mpiexec=$1
smoe=$2
pass=0
fail=0
err=$(mktemp)
trap 'rm -f "$err"' EXIT

expect() { # NP PATTERN ARGS...
  np=$1
  pattern=$2
  shift 2
  timeout 60 "$mpiexec" -n "$np" "$smoe" train --steps 2 --quiet "$@" >/dev/null 2>"$err"
  rc=$?
  lines=$(grep -c '^smoe:' "$err")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$lines" -eq 1 ] && grep -Eq "^smoe: $pattern" "$err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: np $np smoe train $* -> exit $rc, $lines smoe line(s):" >&2
    sed 's/^/    /' "$err" | head -8 >&2
    echo "    expected: $pattern" >&2
  fi
}

expect 4 "4 MPI ranks: the mesh has 3 devices" ici_fsdp_parallelism=3
expect 3 "3 MPI ranks: cannot fill ici_fsdp_parallelism" ici_expert_parallelism=2
expect 4 "argument '--max-memory 1M': the plan needs [0-9]+ bytes per rank" --max-memory 1M ici_expert_parallelism=2
expect 4 "/nonexistent/data.txt: cannot open the data file" --data /nonexistent/data.txt
expect 4 "argument 'num_experts=6': num_experts \(6\) is not divisible by the expert axis \(4\)" \
  ici_expert_parallelism=4 num_experts=6 override_model_config=true
expect 4 "argument '--gather bogus': expected coaxis or legacy" --gather bogus
expect 4 "argument '--steps 0': expected a positive integer" --steps 0
expect 4 "mesh axis 'tensor' has size 2" ici_tensor_parallelism=2 ici_fsdp_parallelism=2
expect 4 "argument '--devices': is set by the number of MPI ranks" --devices 4
expect 4 "argument 'ici_expert_parallelism=two': 'ici_expert_parallelism' must be an integer" \
  ici_expert_parallelism=two
expect 2 "argument '--model nope': unknown model 'nope'" --model nope
expect 2 ".*: the data file has [0-9]+ bytes; a sequence of max_target_length 100000 tokens needs" --data "$0" max_target_length=100000
expect 2 ".*/tests: the data file is a directory, not a regular file" --data "$(cd "$(dirname "$0")" && pwd)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
