# Shared by the training-run test scripts (sourced): runs of smoe train
# that keep their --json and --dump-params outputs in $dir, and their
# comparison by cmp_runs, and checks of refusals. Needs $mpiexec, $smoe,
# $cmp. Sourcing it makes $dir (a temporary directory, removed at exit: a
# script that sets its own EXIT trap removes it there) and zeroes the
# counts $pass and $fail; a script ends with `summary`.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0

# NAME NP ARGS...: one run under a timeout; $dir/NAME.{json,bin,err}
run() {
  name=$1
  np=$2
  shift 2
  timeout 180 "$mpiexec" -n "$np" "$smoe" train --quiet --json \
    --dump-params "$dir/$name.bin" "$@" >"$dir/$name.json" 2>"$dir/$name.err"
}

# the same, counted as a failure when it does not succeed
must_run() {
  if run "$@"; then
    return 0
  fi
  fail=$((fail + 1))
  echo "FAIL: run $1 ($*):" >&2
  tail -5 "$dir/$1.err" >&2
  return 1
}

# WHAT CMD...: a comparison tool's verdict (exit 0: within tolerance)
# counted; its "worst ..." lines shown on one line, its whole output on
# failure
verdict() {
  what=$1
  shift
  if "$@" >"$dir/cmp.out" 2>&1; then
    pass=$((pass + 1))
    echo "ok: $what: $(grep worst "$dir/cmp.out" | tr '\n' ' ')"
  else
    fail=$((fail + 1))
    echo "FAIL: $what" >&2
    cat "$dir/cmp.out" >&2
  fi
}

# A B TOL WHAT: cmp_runs of two runs (TOL 0: bitwise)
same() { verdict "$4" "$cmp" "$dir/$1.json" "$dir/$1.bin" "$dir/$2.json" "$dir/$2.bin" "$3"; }

check() { # CONDITION-EXIT WHAT
  if [ "$1" -eq 0 ]; then
    pass=$((pass + 1))
    echo "ok: $2"
  else
    fail=$((fail + 1))
    echo "FAIL: $2" >&2
  fi
}

# refused: non-zero exit, exactly one smoe line matching PATTERN
refused() { # PATTERN NP ARGS...
  pattern=$1
  np=$2
  shift 2
  timeout 120 "$mpiexec" -n "$np" "$smoe" train --quiet "$@" >/dev/null 2>"$dir/err"
  rc=$?
  lines=$(grep -c '^smoe:' "$dir/err")
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$lines" -eq 1 ] && grep -Eq "^smoe: $pattern" "$dir/err"; then
    pass=$((pass + 1))
    echo "ok: refused: $(grep '^smoe:' "$dir/err" | cut -c1-150)"
  else
    fail=$((fail + 1))
    echo "FAIL: expected /$pattern/, exit $rc, $lines smoe line(s):" >&2
    sed 's/^/    /' "$dir/err" | head -8 >&2
  fi
}

# the closing count, and the exit status of the script
summary() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
