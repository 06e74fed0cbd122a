#!/bin/sh
# House rules, checked on every build (ctest -R layering):
#  1. each external dependency's header stays in its module;
#  2. modules include only downward: every "smoe/X.h" or ../X/ include of a
#     file under src/M/, cli/ or include/smoe/M.h must name a module that M
#     may depend on (the layer table below; the style guide's
#     core -> shard -> config -> plan -> sched -> plot; kernels -> model;
#     runtime -> train -> cli, train reaching the runtime only through comm,
#     checkpoints through ckpt, the recipe through recipe),
#     and another module's internal headers are
#     never included (only its include/smoe/ header is API).
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
check 'cjson/cJSON\.h' '^(src/config/(params_)?json\.c|src/ckpt/manifest\.c|src/sched/schedule_json(_read)?\.c|cli/[a-z_]*json[a-z_]*\.c)$'
check 'openssl/[a-z]*\.h' '^src/ckpt/digest\.c$'
# test hooks are set by test programs (core.h's smoe_set_test_hooks), never
# read from the environment by the library or the CLI
keep 'getenv\("SMOE_TEST_' '^$' 'SMOE_TEST_* read from the environment'

# The layer table: MODULE: the modules it may include (itself implied).
# plot draws the simulator's data (presentation): above sched, which never
# includes it, and below the CLI, its one user.
# comm holds the communication interfaces (the model's expert exchange,
# the trainer's smoe_comm) that the runtime implements over MPI: a header
# neither the model nor the runtime owns, so train, which talks to comm,
# never includes the runtime (and links no MPI).
# ckpt writes and reads checkpoints of a state it is handed (slabs and
# per-weight layout), over comm's collectives, with the config recorded:
# below train, which describes its store to it; no plan, model or runtime.
# recipe reads MaxText's training recipe and key policy out of a config:
# the plan's dimensions and the model's configuration (model.h), nothing
# that runs: below train, which applies it.
layers='
core:
dtype: core
shard: core
config: core shard
plan: core shard config dtype
sched: core shard config plan dtype
plot: core shard config plan sched dtype
kernels: core
comm: core shard dtype
model: core kernels comm
runtime: core shard comm dtype
ckpt: core shard config comm
recipe: core shard config plan kernels comm model dtype
train: core shard config plan sched kernels comm model ckpt recipe dtype
calib: core shard config plan sched kernels comm model runtime ckpt recipe train dtype
cli: core shard config plan sched plot kernels comm model runtime ckpt recipe train calib dtype
'
# Single includes tolerated until their fix lands, each with its reason
# (FILE HEADER-MODULE); none today.
exceptions=''
allowed() { # MODULE -> its allowed list
  printf '%s\n' "$layers" | sed -n "s/^$1: *//p"
}
# the table's modules, each between spaces (names are matched without a
# process per include: the check runs on every build)
modules=" $(printf '%s\n' "$layers" | sed -n 's/^\([a-z]*\):.*/\1/p' | tr '\n' ' ') "
known() { case $modules in *" $1 "*) return 0 ;; esac; return 1; }

files=$(ls src/*/*.c src/*/*.h include/smoe/*.h cli/*.c cli/*.h 2>/dev/null)
for f in $files; do
  case $f in
    include/smoe/*) mod=${f##*/}; mod=${mod%.h} ;;
    cli/*) mod=cli ;;
    src/*) mod=${f#src/}; mod=${mod%%/*} ;;
  esac
  if ! known "$mod"; then
    echo "$f: module '$mod' is not in the layer table of $0" >&2
    fail=$((fail + 1))
    continue
  fi
  allow=" $(allowed "$mod") "
  ok=1
  # every quoted include: smoe/X.h, ../X/file.h, or a file of the same folder
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
    case $inc in
      smoe/*.h) to=${inc##*/}; to=${to%.h} ;;
      ../*/*)
        to=${inc#../}; to=${to%%/*}
        echo "$f: includes $inc, an internal header of module '$to' (use include/smoe/$to.h)" >&2
        ok=0
        continue ;;
      */*)
        echo "$f: includes $inc: not a header of its own folder or include/smoe/" >&2
        ok=0
        continue ;;
      *)
        # a header next to the file: same module (generated tables included)
        continue ;;
    esac
    [ "$to" = "$mod" ] && continue
    if ! known "$to"; then
      echo "$f: includes $inc, a module that is not in the layer table" >&2
      ok=0
      continue
    fi
    case $allow in *" $to "*) continue ;; esac
    if printf '%s\n' "$exceptions" | grep -qx "$f $to"; then
      continue
    fi
    echo "$f: includes $inc, but module '$mod' may depend only on: $(allowed "$mod")" >&2
    ok=0
  done
  if [ "$ok" -eq 1 ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
  fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
