#!/bin/sh
# House rule: each external dependency's header stays in its module.
# usage: scripts/check-layering.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"
fail=0
pass=0
# INCLUDE_REGEX ALLOWED_PATH_REGEX WHAT: no file outside the allowed paths
# has a matching #include
keep() {
  stray=$(grep -rlE "$1" src include cli 2>/dev/null | grep -vE "$2" || true)
  if [ -n "$stray" ]; then
    echo "$3: $stray" >&2
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
check() { keep "#include *<$1>" "$2" "<$1> included outside its module"; }
# a module's public header is included only by the modules above it
above() { keep "#include *\"smoe/$1\"" "$2" "smoe/$1 included below its layer"; }
check 'yaml\.h' '^src/config/'
check 'mpi\.h' '^src/runtime/'
check 'cblas\.h' '^src/kernels/'
check 'cjson/cJSON\.h' '^(src/config/params_json\.c|src/train/manifest\.c|cli/[a-z_]*json[a-z_]*\.c)$'
check 'openssl/[a-z]*\.h' '^src/train/digest\.c$'
above 'calib\.h' '^(src/calib/|include/smoe/calib\.h$|cli/)'
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
