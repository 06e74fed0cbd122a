#!/bin/sh
# smoe sim --profile reads a trace's numbers range-checked: pid and tid
# integers from 0 to 2^31-1, an X span's ts and dur microseconds from 0 to
# a year. Each hostile number (a 1e308 or infinite dur that printed a
# 300-digit step, a negative dur that set the compute to 0, a pid of 1e300
# that overflowed the int conversion) is refused with exit 2 and one line
# naming the file, the event's line:col, its index and key. The fixture
# (tests/data/sim/profile.json) has one event a line: traceEvents[i] is on
# line i + 2. A legal trace (the fixture) is still read.
# usage: trace_bounds.sh SMOE DATA_DIR
smoe=$1
data=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pass=0
fail=0

sim() {
  "$smoe" sim --base "$SMOE_CONFIG_DIR/train.yml" --model tiny --devices 2 --hardware tpu7x \
    --profile "$@"
}

# bad LINE FROM TO PATTERN: the fixture with FROM replaced by TO on LINE
# is refused: exit 2, one line on stderr matching FILE:LINE:COL: PATTERN
bad() {
  f="$dir/bad.json"
  sed "$1s/$2/$3/" "$data/sim/profile.json" >"$f"
  if cmp -s "$f" "$data/sim/profile.json"; then
    fail=$((fail + 1))
    echo "FAIL: the fixture has no '$2' on line $1" >&2
    return
  fi
  sim "$f" >/dev/null 2>"$dir/err"
  rc=$?
  lines=$(wc -l <"$dir/err")
  if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -Eq "^smoe: $f:$1:[0-9]+: $4" "$dir/err"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: line $1 '$2' -> '$3': exit $rc, $lines line(s):" >&2
    sed 's/^/    /' "$dir/err" >&2
    echo "    expected: $f:$1:COL: $4" >&2
  fi
}

range='is out of range \(expected'
bad 4 '"dur":10000' '"dur":1e308' "traceEvents\[2\]\.dur: 1e\+308 $range microseconds"
bad 4 '"dur":10000' '"dur":1e999' "traceEvents\[2\]\.dur: inf $range microseconds"
bad 4 '"dur":10000' '"dur":-5' "traceEvents\[2\]\.dur: -5 $range microseconds"
bad 5 '"ts":10000' '"ts":-1' "traceEvents\[3\]\.ts: -1 $range microseconds"
bad 5 '"ts":10000' '"ts":4e13' "traceEvents\[3\]\.ts: 4e\+13 $range microseconds"
bad 4 '"ts":0' '"ts":"0"' "traceEvents\[2\]\.ts: expected microseconds"
bad 4 '"dur":10000' '"dur":null' "traceEvents\[2\]\.dur: expected microseconds"
bad 2 '"pid":0' '"pid":1e300' "traceEvents\[0\]\.pid: 1e\+300 $range an integer"
bad 4 '"pid":0' '"pid":2147483648' "traceEvents\[2\]\.pid: 2\.14748e\+09 $range an integer"
bad 4 '"pid":0' '"pid":0.5' "traceEvents\[2\]\.pid: 0\.5 $range an integer"
bad 6 '"tid":2' '"tid":-2' "traceEvents\[4\]\.tid: -2 $range an integer"
bad 3 '"tid":0' '"tid":1e10' "traceEvents\[1\]\.tid: 1e\+10 $range an integer"
bad 4 '"name":"fwd L0 dense"' '"name":7' "traceEvents\[2\]\.name: expected a string"
bad 4 '"dur":10000}' '"dur":10000 x}' "not JSON"

# the fixture itself: read, its medians printed
if sim "$data/sim/profile.json" 2>"$dir/err" | grep -q "dense 10.00 / 20.00, MoE 25.00 / 60.00 ms"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: the fixture's profile: $(cat "$dir/err")" >&2
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
