#!/bin/sh
# The layering check must be able to fail: on a copy of the tree, each
# planted violation (an upward include, another module's internal header,
# an external header outside its module) must make it exit non-zero and
# name the file; the untouched copy must pass.
# usage: layering_selftest.sh SOURCE_DIR
src=$1
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/t/scripts"
cp -R "$src/src" "$src/include" "$src/cli" "$tmp/t/"
cp "$src/scripts/check-layering.sh" "$tmp/t/scripts/"
run() { sh "$tmp/t/scripts/check-layering.sh" "$tmp/t" >"$tmp/out" 2>&1; }
if run; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: the clean tree fails:" >&2; cat "$tmp/out" >&2; fi
# FILE LINE PATTERN: plant LINE at the end of FILE, expect PATTERN; the
# file is restored after, so each plant is the one violation of the copy
plant() {
  cp "$tmp/t/$1" "$tmp/saved"
  echo "$2" >>"$tmp/t/$1"
  if run; then
    fail=$((fail + 1)); echo "FAIL: '$2' in $1 passed the check" >&2
  elif grep -q "$3" "$tmp/out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL: '$2' in $1: no '$3' in:" >&2; cat "$tmp/out" >&2
  fi
  cp "$tmp/saved" "$tmp/t/$1"
}
plant src/runtime/ep.c '#include "smoe/plan.h"' "src/runtime/ep.c: includes smoe/plan.h"
plant src/core/err.c '#include "smoe/shard.h"' "src/core/err.c: includes smoe/shard.h"
plant include/smoe/shard.h '#include "smoe/config.h"' "include/smoe/shard.h: includes smoe/config.h"
plant src/sched/cost.c '#include "smoe/runtime.h"' "src/sched/cost.c: includes smoe/runtime.h"
plant src/model/moe.c '#include "smoe/plan.h"' "src/model/moe.c: includes smoe/plan.h"
plant src/model/mlp.c 'static void f(float *y) { smoe_vec_scale(y, 2.0f, 1); }' "kernels.h called outside the kernel table"
plant src/train/optim.c '    smoe_adamw_step(p, m, v, g, n, c);' "src/train/optim.c:.*smoe_adamw_step"
plant src/train/loop.c '#include "smoe/runtime.h"' "src/train/loop.c: includes smoe/runtime.h"
plant include/smoe/train.h '#include "smoe/runtime.h"' "include/smoe/train.h: includes smoe/runtime.h"
plant src/train/loop.c '#include "../model/model_impl.h"' "an internal header of module 'model'"
plant src/ckpt/checkpoint.c '#include "smoe/train.h"' "src/ckpt/checkpoint.c: includes smoe/train.h"
plant src/train/store.c '#include "../ckpt/ckpt_impl.h"' "an internal header of module 'ckpt'"
plant src/train/store.c '#include <openssl/evp.h>' "included outside its module: src/train/store.c"
plant src/plan/plan.c '#include "smoe/nosuch.h"' "not in the layer table"
plant src/sched/sim.c '#include <mpi.h>' "included outside its module: src/sched/sim.c"
plant src/sched/sim.c '#include "smoe/plot.h"' "src/sched/sim.c: includes smoe/plot.h"
plant include/smoe/sched.h '#include "smoe/plot.h"' "include/smoe/sched.h: includes smoe/plot.h"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
