#!/bin/sh
# examples/train_tiny's STEPS argument (the single-rank build, no MPI):
# a count it cannot parse or hold is refused with one line naming STEPS
# and exit 1, before any training: past smoe train's limit (2^40), not a
# number, and 2^40 itself (a record per step does not fit in memory).
# usage: example_steps.sh TRAIN_TINY_LOCAL
example=$1
pass=0
fail=0
err=$(mktemp)
trap 'rm -f "$err" "$err.raw"' EXIT

refused() { # PATTERN STEPS
  timeout 60 "$example" "$2" >/dev/null 2>"$err.raw"
  rc=$?
  # Under ASan (allocator_may_return_null=1) a refused allocation adds its
  # own "==PID==WARNING: AddressSanitizer failed to allocate" line.
  grep -v '^==[0-9]*==WARNING: AddressSanitizer failed to allocate' \
    "$err.raw" >"$err"
  lines=$(grep -c . "$err")
  if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -Eq "^train_tiny: $1" "$err"; then
    pass=$((pass + 1))
    echo "ok: STEPS $2: $(cat "$err")"
  else
    fail=$((fail + 1))
    echo "FAIL: STEPS $2: expected /$1/, exit 1; got exit $rc, $lines line(s):" >&2
    sed 's/^/    /' "$err" | head -5 >&2
  fi
}

refused "STEPS: '99999999999999999': expected an integer from 1 to 1099511627776" 99999999999999999
refused "STEPS: '1e3': expected an integer" 1e3
refused "STEPS: '0': expected an integer" 0
refused "STEPS: 1099511627776: out of memory for a record per step" 1099511627776
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
