#!/bin/sh
# Per-step time of smoe train against the same model in PyTorch
# (bench/torch_model.py: same architecture, parameter count checked equal,
# same batch, forward + backward + AdamW), one process and one thread each,
# on the tiny model of the main job and on a 512-wide one. Interleaved: each
# round runs smoe then PyTorch (the order swapped every other round), STEPS
# timed steps each after a warm-up step, so a change of the machine's load
# lands on both; the figures are the medians over the rounds of each
# process's median step, with the range over the rounds, and the throughput
# ratio (PyTorch's step / smoe's) of every round.
# PyTorch is an optional benchmark dependency (Debian's python3-torch);
# without it the script says so and exits 0.
# usage: bench/vs_torch.sh [BUILD_DIR] [ROUNDS] [STEPS]   (defaults build 5 10)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
rounds=${2:-5}
steps=${3:-10}
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "vs_torch: PyTorch is not installed (apt-get install python3-torch): skipped"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export SMOE_CONFIG_DIR="$build/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== machine: $(lscpu | sed -n 's/^CPU(s): *//p') CPUs, $(lscpu | sed -n 's/^Model name: *//p')"
echo "== load before: $(uptime)"
echo "== torch $("$py" -c 'import torch; print(torch.__version__)'), one thread each"

wide="override_model_config=true base_emb_dim=512 base_mlp_dim=1024 base_moe_mlp_dim=256"
wide="$wide base_num_query_heads=8 base_num_kv_heads=8 q_lora_rank=128 kv_lora_rank=128"
wide="$wide qk_nope_head_dim=64 qk_rope_head_dim=32 v_head_dim=64 max_target_length=256"

smoe_round() { # NAME KEYS... -> median step ms of smoe train on one rank
  name=$1
  shift
  "$build/smoe" train --steps $((steps + 1)) --quiet --json "$@" >"$tmp/$name.json"
  "$py" -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s["median_step_ms"], s["params"])' "$tmp/$name.json"
}
torch_round() { # NAME -> median step ms, params
  "$py" "$top/bench/torch_model.py" "$1" "$steps" >"$tmp/t$1.json"
  "$py" -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["median_step_ms"], s["params"])' "$tmp/t$1.json"
}

for name in tiny wide; do
  keys=""
  [ "$name" = wide ] && keys=$wide
  : >"$tmp/$name.rows"
  r=1
  while [ "$r" -le "$rounds" ]; do
    if [ $((r % 2)) -eq 1 ]; then
      # shellcheck disable=SC2086
      s=$(smoe_round "$name" $keys)
      t=$(torch_round "$name")
    else
      t=$(torch_round "$name")
      # shellcheck disable=SC2086
      s=$(smoe_round "$name" $keys)
    fi
    echo "$s $t" >>"$tmp/$name.rows"
    r=$((r + 1))
  done
  "$py" - "$name" "$tmp/$name.rows" <<'EOF'
import statistics, sys
name, rows = sys.argv[1], [l.split() for l in open(sys.argv[2])]
sm = [float(r[0]) for r in rows]; tm = [float(r[2]) for r in rows]
ps, pt = rows[0][1], rows[0][3]
ratio = [t / s for s, t in zip(sm, tm)]
print(f"{name}: parameters smoe {ps}, PyTorch {pt} ({'equal' if ps == pt else 'DIFFERENT'})")
for i, (s, t) in enumerate(zip(sm, tm)):
    print(f"  round {i + 1}: smoe {s:8.2f} ms  PyTorch {t:8.2f} ms  ratio {t / s:.2f}")
print(f"  median step: smoe {statistics.median(sm):.2f} ms [{min(sm):.2f}-{max(sm):.2f}], "
      f"PyTorch {statistics.median(tm):.2f} ms [{min(tm):.2f}-{max(tm):.2f}]; "
      f"smoe throughput / PyTorch's: {statistics.median(ratio):.2f} "
      f"[{min(ratio):.2f}-{max(ratio):.2f}] over {len(rows)} rounds")
EOF
done
echo "== load after: $(uptime)"
