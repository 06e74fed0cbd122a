#!/bin/sh
# smoe train over NCCL on the GPU machine: 2 processes on GPU 0 (a distinct
# NCCL_HOSTID each, as NCCL needs for two ranks on one device), fsdp=2,
# against one process with the same global batch (per_device_batch_size 8),
# both --device cuda in fp32, 4 steps: every step's loss within 1e-5
# relative, as train_oracle holds CPU ranks. Needs mpirun and Python there.
# usage: gpu-nccl-train.sh BIN_DIR OUT_DIR   (BIN_DIR: smoe, configs, lib)
set -u
bin=${1:-.gpu}
out=${2:-gpu-report}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
common="--steps 4 --device cuda --json --quiet ici_expert_parallelism=1"
# shellcheck disable=SC2086
"$bin/smoe" train $common per_device_batch_size=8 >"$out/nccl_one.json" 2>"$out/nccl_one.err" ||
  { echo "one rank failed: $(tail -1 "$out/nccl_one.err")"; exit 1; }
# shellcheck disable=SC2016
mpirun -np 2 -x LD_LIBRARY_PATH sh -c \
  'NCCL_HOSTID=smoe$OMPI_COMM_WORLD_RANK exec "$0" train $1' "$bin/smoe" "$common" \
  >"$out/nccl_two.json" 2>"$out/nccl_two.err" ||
  { echo "two ranks over NCCL failed: $(tail -1 "$out/nccl_two.err")"; exit 1; }
python3 - "$out/nccl_one.json" "$out/nccl_two.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
worst = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
ok = len(la) == len(lb) == 4 and worst <= 1e-5
print("%s: 2 ranks over NCCL vs 1 rank on GPU 0, 4 steps: worst loss difference %.3g (losses %s)"
      % ("ok" if ok else "FAIL", worst, " ".join("%.6f" % x for x in lb)))
sys.exit(0 if ok else 1)
PY
