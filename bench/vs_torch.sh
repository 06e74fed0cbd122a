#!/bin/sh
# Per-step time of smoe train against the same model in PyTorch
# (bench/torch_model.py: same architecture, parameter count checked equal,
# same batch, forward + backward + AdamW), one process and one thread each,
# on the tiny model of the main job and on a 512-wide one. Interleaved: each
# round runs smoe then PyTorch (the order swapped every other round), STEPS
# timed steps each after a warm-up step, so a change of the machine's load
# lands on both; the figures are the medians over the rounds, with the
# range over the rounds, of each process's median step (wall time) and of
# its CPU time per step (bench/vs_torch_rounds.py), and the throughput
# ratio (PyTorch's step / smoe's) of every round by each measure.
# With BASE_BUILD (another build, e.g. of main) its smoe is a third side of
# every round, the three in rotating order, and the ratios of both builds
# to PyTorch and of this build to the base are printed.
# PyTorch is an optional benchmark dependency (Debian's python3-torch);
# without it the script says so and exits 0.
# usage: bench/vs_torch.sh [BUILD_DIR] [ROUNDS] [STEPS] [BASE_BUILD]
#        (defaults build 5 10, no base)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" && pwd)
rounds=${2:-5}
steps=${3:-10}
base=
[ -n "${4:-}" ] && base=$(cd "$4" && pwd)/smoe
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "vs_torch: PyTorch is not installed (apt-get install python3-torch): skipped"
  exit 0
fi
. "$top/scripts/mpi-env.sh"
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
export SMOE_CONFIG_DIR="$build/configs"
echo "== machine: $(lscpu | sed -n 's/^CPU(s): *//p') CPUs, $(lscpu | sed -n 's/^Model name: *//p')"
echo "== load before: $(uptime)"
echo "== torch $("$py" -c 'import torch; print(torch.__version__)'), one thread each"

wide="override_model_config=true base_emb_dim=512 base_mlp_dim=1024 base_moe_mlp_dim=256"
wide="$wide base_num_query_heads=8 base_num_kv_heads=8 q_lora_rank=128 kv_lora_rank=128"
wide="$wide qk_nope_head_dim=64 qk_rope_head_dim=32 v_head_dim=64 max_target_length=256"

"$py" "$top/bench/vs_torch_rounds.py" "$build/smoe" "$top/bench/torch_model.py" "$rounds" "$steps" "$wide" "$base"
echo "== load after: $(uptime)"
