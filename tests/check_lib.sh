# Sourced by the test scripts that count checks: $dir (a temporary
# directory, removed at exit), the counts $pass and $fail, ok and bad to
# count one, and summary to end with "N passed, N failed" and the status.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok: $1"; }
bad() { fail=$((fail + 1)); echo "FAIL: $1" >&2; }
summary() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
