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
#     never included (only its include/smoe/ header is API);
#  3. src/model and src/train call no kernel of kernels.h but through the
#     kernel table of backend.h (the rule by the file list below).
# usage: scripts/check-layering.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"
# Every rule reads one list, FILE:LINE, of the tree's lines that name an
# include or getenv (each rule's pattern below names one of the two), made
# by a single grep; one awk applies the rules to it: the check runs on
# every build, so it starts no process per file or per include.
rules=''
# INCLUDE_REGEX ALLOWED_PATH_REGEX WHAT: no file outside the allowed paths
# has a matching line
keep() {
  rules="$rules$1	$2	$3
"
}
check() { keep "#include *<$1>" "$2" "<$1> included outside its module"; }
# a module's public header is included only by the modules above it
above() { keep "#include *\"smoe/$1\"" "$2" "smoe/$1 included below its layer"; }
check 'yaml\.h' '^src/config/'
check 'mpi\.h' '^src/runtime/'
check 'cblas\.h' '^src/kernels/'
check 'cjson/cJSON\.h' '^(src/config/(params_)?json\.c|src/ckpt/manifest\.c|src/sched/schedule_json(_read)?\.c|cli/[a-z_]*json[a-z_]*\.c)$'
check 'openssl/[a-z]*\.h' '^src/ckpt/digest\.c$'
check 'cuda[a-z_]*\.h' '^src/cuda/'
check 'cublas[A-Za-z]*\.h' '^src/cuda/'
check 'nccl\.h' '^src/nccl/'
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
# backend holds the kernel table (backend.h) that the model and the
# optimizer call; like comm, an interface implemented below its users: the
# kernels module provides the CPU table, a device module a second one.
# dev is the device layer (memory, streams, events) with its host
# emulation; cuda implements it and the kernel table's device twin (for
# which it reads backend.h and kernels.h's argument types), the only module
# with CUDA headers; nccl is the only one with nccl.h. emul runs the CPU
# kernels as the emulated device's stream work: the same place.
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
backend:
kernels: core backend dtype
dev: core
cuda: core dev backend kernels
emul: core dev backend kernels dtype
nccl: core
comm: core shard dtype dev backend
ncomm: core shard dtype dev backend comm nccl
model: core kernels comm backend
runtime: core shard comm dtype
ckpt: core shard config comm
recipe: core shard config plan kernels backend comm model dtype
train: core shard config plan sched kernels backend comm model ckpt recipe dtype
calib: core shard config plan sched kernels backend comm model runtime ckpt recipe train dtype
cli: core shard config plan sched plot kernels backend comm model runtime ckpt recipe train calib dtype dev cuda emul ncomm
'
# Single includes tolerated until their fix lands, each with its reason
# (FILE HEADER-MODULE); none today.
exceptions=''
files=$(ls src/*/*.c src/*/*.h include/smoe/*.h cli/*.c cli/*.h 2>/dev/null)
# 3. the model and the trainer run a step's kernels through the kernel
#    table (backend.h), never by calling kernels.h: its functions but the
#    BLAS set-up and the RoPE tables that smoe_model_new builds once
kfun=$(grep -oE 'smoe_[a-z0-9_]+\(' include/smoe/kernels.h | tr -d '(' |
  grep -vE '^smoe_(blas_.*|rope_freqs|rope_table)$' | sort -u | paste -sd '|' -)
direct=$(grep -nE "(^|[^a-z0-9_])($kfun)\(" src/model/*.c src/train/*.c 2>/dev/null || true)
grep -rE 'include|getenv' src include cli 2>/dev/null |
DIRECT=$direct RULES=$rules LAYERS=$layers EXCEPTIONS=$exceptions FILES=$files SELF=$0 awk '
function err(msg) { print msg > "/dev/stderr" }
BEGIN {
  # the table: "MODULE: ALLOWED..." rows; a module may include itself
  n = split(ENVIRON["LAYERS"], row, "\n")
  for (i = 1; i <= n; i++)
    if (match(row[i], /^[a-z]*:/)) {
      m = substr(row[i], 1, RLENGTH - 1)
      rest = substr(row[i], RLENGTH + 1)
      sub(/^ */, "", rest)
      known[m] = 1
      allow[m] = rest
    }
  n = split(ENVIRON["EXCEPTIONS"], row, "\n")
  for (i = 1; i <= n; i++) excused[row[i]] = 1
  nrules = split(ENVIRON["RULES"], rule, "\n")
}
{
  f = $0; sub(/:.*/, "", f)
  text = substr($0, length(f) + 2)
  # the keep rules: files in the order grep met them, each once
  for (r = 1; r < nrules; r++) {
    split(rule[r], part, "\t")
    if (text ~ part[1] && !((r, f) in hit)) {
      hit[r, f] = 1
      if (f !~ part[2]) stray[r] = stray[r] (stray[r] == "" ? "" : "\n") f
    }
  }
  # the first quoted include of the line, as the layer rules read it
  if (match(text, /^[[:space:]]*#[[:space:]]*include[[:space:]]*"[^"]*"/)) {
    inc = substr(text, RSTART, RLENGTH - 1)
    sub(/^[^"]*"/, "", inc)
    incs[f] = incs[f] SUBSEP inc
  }
}
END {
  pass = 0; fail = 0
  if (ENVIRON["DIRECT"] != "") { err("kernels.h called outside the kernel table:\n" ENVIRON["DIRECT"]); fail++ } else pass++
  for (r = 1; r < nrules; r++) {
    split(rule[r], part, "\t")
    if (stray[r] != "") { err(part[3] ": " stray[r]); fail++ } else pass++
  }
  nf = split(ENVIRON["FILES"], file, "\n")
  for (i = 1; i <= nf; i++) {
    f = file[i]
    if (f ~ /^include\/smoe\//) { mod = f; sub(/.*\//, "", mod); sub(/\.h$/, "", mod) }
    else if (f ~ /^cli\//) mod = "cli"
    else { mod = substr(f, 5); sub(/\/.*/, "", mod) }
    if (!(mod in known)) {
      err(f ": module '\''" mod "'\'' is not in the layer table of " ENVIRON["SELF"])
      fail++
      continue
    }
    ok = 1
    k = split(substr(incs[f], 2), list, SUBSEP)
    for (j = 1; j <= k; j++) {
      inc = list[j]
      if (inc ~ /^smoe\/.*\.h$/) { to = inc; sub(/.*\//, "", to); sub(/\.h$/, "", to) }
      else if (inc ~ /^\.\.\/.*\//) {
        to = substr(inc, 4); sub(/\/.*/, "", to)
        err(f ": includes " inc ", an internal header of module '\''" to "'\'' (use include/smoe/" to ".h)")
        ok = 0
        continue
      } else if (inc ~ /\//) {
        err(f ": includes " inc ": not a header of its own folder or include/smoe/")
        ok = 0
        continue
      } else continue # a header next to the file: same module (generated tables included)
      if (to == mod) continue
      if (!(to in known)) {
        err(f ": includes " inc ", a module that is not in the layer table")
        ok = 0
        continue
      }
      if (index(" " allow[mod] " ", " " to " ") || ((f " " to) in excused)) continue
      err(f ": includes " inc ", but module '\''" mod "'\'' may depend only on: " allow[mod])
      ok = 0
    }
    if (ok) pass++; else fail++
  }
  print pass " passed, " fail " failed"
  exit fail != 0
}'
