# Sourced by the benchmarks that print a table or figures made by another
# program. /bin/sh has no pipefail: `prog | sed` exits with sed's status,
# so a table that failed left the benchmark exiting 0. indented runs the
# program to a file, prints it indented, and ends the benchmark with the
# program's status (and one line naming it) when it failed.

# CMD ARGS...: CMD's standard output, indented by three spaces; its
# failure ends the script with its status.
indented() {
  _out=$(mktemp) || exit 1
  _rc=0
  "$@" >"$_out" || _rc=$?
  sed 's/^/   /' "$_out"
  rm -f "$_out"
  if [ "$_rc" -ne 0 ]; then
    echo "$(basename "$0"): '$1' failed (exit $_rc)" >&2
    exit "$_rc"
  fi
}
