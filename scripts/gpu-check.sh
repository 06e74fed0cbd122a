#!/bin/sh
# The checks that need a GPU, as one command on the GPU machine, within a
# budget of BUDGET_S seconds (default 400, under the 7 minutes a device
# check may take): each check's log and one report.md go to OUT_DIR; a
# check gets at most what is left of the budget, and one that no time is
# left for is reported "not run" (a failure).
#  - the machine: GPU, driver, CUDA toolkit;
#  - test_dev cuda: the device layer's rules on device 0 (dev.h);
#  - test_kops_dev cuda: every kernel of the CUDA table against its CPU
#    twin (cuda.h), within 1e-5 in fp32;
#  - test_model_dev cuda: a model step (loss and every gradient), dense and
#    MoE, against the CPU's, within 1e-5, fp32 and the bf16 mode;
#  - test_train_dev cuda: 4 steps of smoe train's tiny model on the GPU,
#    losses and grad norms within 1e-5 of the CPU's;
#  - test_vrank_dev cuda: 4 ranks on the GPU (fsdp=4, data=2 x fsdp=2),
#    5 steps within 1e-5 of the single-rank CPU run, schedules bitwise;
#  - vs_torch_gpu.py: smoe's bf16 step against PyTorch eager's on the
#    tiny, 512-wide and big (1.29e9 parameters, sequence 2048) models,
#    and smoe's FLOP rate over a cuBLAS bf16 GEMM's of the same run;
#  - bench_vrank_link: 2x2 ranks over a stood-in link (the rate at which
#    the link takes 0.7 of the step), tiny and 512-wide: the exposed wait
#    prefetch hides, the prefetch step over max(compute, link); JSON in
#    OUT_DIR;
#  - each under compute-sanitizer's memcheck and racecheck;
#  - nccl_pair.sh: two processes on GPU 0 through the real NCCL (a distinct
#    NCCL_HOSTID each), smoe's collectives against hand-computed values;
#  - gpu-nccl-train.sh: smoe train on 2 processes over NCCL on GPU 0
#    against one, loss within 1e-5 at every step.
# The binaries come from scripts/gpu-pack.sh (built on the CPU machine).
# Order: correctness first (the tests, the sanitizers, NCCL), the
# benchmarks last, so a short budget spends itself on what decides. ONLY
# (space-separated check names) runs those alone, for a rerun on a warm
# machine of what failed or found no time.
# Exit status: 0 when every check passed (a skip counts as a failure here:
# this script runs only where a GPU is expected).
# usage: [BUDGET_S=400] [ONLY="name ..."] scripts/gpu-check.sh [BIN_DIR] [OUT_DIR]
set -u
bin=${1:-.gpu}
out=${2:-${OUT:-gpu-report}}
mkdir -p "$out"
report=$out/report.md
failed=0
{
  echo "# GPU check ($(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  echo '```'
  echo
  echo "| check | exit | last line |"
  echo "|---|---|---|"
} >"$report"

budget=${BUDGET_S:-400}
t0=$(date +%s)
# NAME SECONDS CMD...: run one check (at most SECONDS, and never past the
# budget), its output in OUT/NAME.log
check() {
  name=$1
  secs=$2
  shift 2
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
  left=$((budget - ($(date +%s) - t0)))
  if [ "$left" -le 5 ]; then
    failed=$((failed + 1))
    echo "| $name | - | not run: the ${budget} s budget is spent |" >>"$report"
    return
  fi
  [ "$secs" -gt "$left" ] && secs=$left
  timeout "$secs" "$@" >"$out/$name.log" 2>&1
  rc=$?
  [ "$rc" -eq 0 ] || failed=$((failed + 1))
  echo "| $name | $rc | $(tail -1 "$out/$name.log" | tr '|' '/') |" >>"$report"
}

# the libraries carried beside the binaries, after the machine's own
LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$bin/lib"
export LD_LIBRARY_PATH
check test_dev_cuda 120 "$bin/test_dev" cuda
check test_kops_dev_cuda 120 "$bin/test_kops_dev" cuda
check test_model_dev_cuda 120 "$bin/test_model_dev" cuda
check test_train_dev_cuda 180 "$bin/test_train_dev" "$bin/configs" "$bin/gpl-3.0.txt" cuda
check test_vrank_dev_cuda 180 "$bin/test_vrank_dev" "$bin/configs" "$bin/gpl-3.0.txt" cuda
san=compute-sanitizer
command -v "$san" >/dev/null 2>&1 || san="sh -c 'echo compute-sanitizer is not on this machine; exit 1'"
for t in test_kops_dev test_model_dev test_dev; do
  for tool in memcheck racecheck; do
    eval check "$t-$tool" 180 "$san" --tool "$tool" --error-exitcode 9 "\$bin/$t" cuda
  done
done
# NCCL: the system's, else PyTorch's wheel
ncclp=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null)
if [ -n "$ncclp" ]; then
  LD_LIBRARY_PATH="$ncclp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
check nccl_pair 180 sh "$bin/nccl_pair.sh" "$bin/nccl_pair"
check nccl_train 180 sh "$bin/gpu-nccl-train.sh" "$bin" "$out"
check vs_torch_gpu 200 python3 "$bin/vs_torch_gpu.py" "$bin" "$bin/configs" "$bin/gpl-3.0.txt" \
  --rounds 2 --steps 10 --out "$out/vs_torch_gpu.json"
for m in tiny wide; do
  check "bench_vrank_link_$m" 120 "$bin/bench_vrank_link" "$bin/configs" "$bin/gpl-3.0.txt" \
    --device cuda --model "$m" --link auto --rounds 3 --out "$out/vrank_link_$m.json"
done
echo >>"$report"
echo "$failed check(s) failed" >>"$report"
cat "$report"
[ "$failed" -eq 0 ]
