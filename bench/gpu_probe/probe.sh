#!/bin/bash
# The GPU machine's probe (run there from the repo root, with the binary built
# here by the command in probe.cu and the two libraries smoe needs beside it):
# what is installed, whether a binary built on the CPU machine runs, the bf16
# GEMM rate, and NCCL with two ranks on one device.
# usage: bench/gpu_probe/probe.sh PROBE_BINARY
set -u
probe=$1
uname -r
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
which nvcc cmake ninja mpirun gcc python3 compute-sanitizer
nvcc --version | tail -1; cmake --version | head -1; gcc --version | head -1
python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
ldd build/smoe | grep 'not found'
# NCCL comes with PyTorch's wheel there; cuBLASLt with the CUDA toolkit
nccl=$(python3 -c "import importlib.util as u; print(list(u.find_spec('nvidia.nccl').submodule_search_locations)[0] + '/lib')")
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
export LD_LIBRARY_PATH=$cuda/lib64:$nccl:${LD_LIBRARY_PATH:-}
"$probe"
echo "--- two processes on one GPU, a distinct NCCL_HOSTID each"
id=$(mktemp -u)
NCCL_HOSTID=h0 timeout -s KILL 60 "$probe" 0 "$id" &
NCCL_HOSTID=h1 timeout -s KILL 60 "$probe" 1 "$id"
wait
