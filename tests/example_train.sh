#!/bin/sh
# examples/train_tiny (training through the library API) against smoe
# train, the oracle: the same config, seed and steps must give bitwise the
# same final parameters (every tensor of the dumps, and their SHA-256) and
# the same per-step loss, lr, grad_norm, aux_loss and z_loss as both write
# them to JSON (cJSON's shortest round-trip digits; cmp_runs at tolerance
# 0), on one rank started without a launcher and
# with `mpiexec -n 1`, on 2 ranks (the MPI runtime's communicator), with
# --local (the single-rank communicator: MPI linked but never started),
# and built without the runtime (TRAIN_TINY_LOCAL: no MPI linked, none
# initialised); the example's own
# checks hold (the loss falls over the steps, every parameter gathered
# whole is finite).
# usage: example_train.sh MPIEXEC SMOE CMP_RUNS TRAIN_TINY TRAIN_TINY_LOCAL
mpiexec=$1
smoe=$2
cmp=$3
example=$4
local_example=$5
. "$(dirname "$0")/runs_lib.sh"
steps=6

# NAME LAUNCH...: the example run as LAUNCH (with $ex_args before its own
# arguments); $dir/NAME.{json,bin,out,err}
example_run() {
  name=$1
  shift
  # shellcheck disable=SC2086
  if timeout 180 "$@" "$example" ${ex_args:-} "$steps" "$dir/$name.json" "$dir/$name.bin" \
       >"$dir/$name.out" 2>"$dir/$name.err"; then
    pass=$((pass + 1))
    echo "ok: example $name ran"
  else
    fail=$((fail + 1))
    echo "FAIL: example $name:" >&2
    tail -5 "$dir/$name.err" "$dir/$name.out" >&2
  fi
}

example_run ex1                       # one rank, no launcher
example_run ex1m "$mpiexec" -n 1
example_run ex2 "$mpiexec" -n 2
ex_args=--local example_run exl env  # the single-rank communicator
ex_args=
example=$local_example
example_run local env                 # no MPI at all
if ldd "$local_example" | grep -qi 'libmpi'; then
  fail=$((fail + 1))
  echo "FAIL: the single-rank build links MPI: $(ldd "$local_example" | grep -i libmpi)" >&2
else
  pass=$((pass + 1))
  echo "ok: the single-rank build links no MPI library"
fi
grep -q 'all finite' "$dir/ex1.out"
check $? "every parameter of the example's run is finite (gathered whole)"
grep -q '(falls)' "$dir/ex1.out"
check $? "the loss falls over $steps steps: $(grep '^loss:' "$dir/ex1.out")"
n=$(grep -c '^step ' "$dir/ex1.out")
[ "$n" -eq "$steps" ]
check $? "one line per step ($n)"

must_run t1 1 --steps "$steps" && same t1 ex1 0 "example (1 rank, no launcher) = smoe train -n 1, bitwise"
same t1 ex1m 0 "example (mpiexec -n 1) = smoe train -n 1, bitwise"
same t1 exl 0 "example --local (single-rank communicator) = smoe train -n 1, bitwise"
same t1 local 0 "example built without MPI (single-rank communicator) = smoe train -n 1, bitwise"
must_run t2 2 --steps "$steps" && same t2 ex2 0 "example (2 ranks) = smoe train -n 2, bitwise"
# the comparison can fail: another seed differs
if must_run t1s 1 --steps "$steps" --seed 2; then
  if "$cmp" "$dir/t1s.json" "$dir/t1s.bin" "$dir/ex1.json" "$dir/ex1.bin" 0 >/dev/null 2>&1; then
    fail=$((fail + 1))
    echo "FAIL: a run with seed 2 compared equal to the example's (seed 1)" >&2
  else
    pass=$((pass + 1))
    echo "ok: a run with another seed is told apart"
  fi
fi
summary
