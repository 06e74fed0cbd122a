#!/bin/sh
# The two-process NCCL check (nccl_pair.c) on GPU 0: both ranks on one
# device, each with its own NCCL_HOSTID (NCCL refuses two ranks of one
# host on one device otherwise). Exit 77 (skip) without a CUDA device.
# usage: nccl_pair.sh NCCL_PAIR_BINARY
set -u
bin=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
NCCL_HOSTID=smoe-h0 timeout 120 "$bin" 0 "$dir/id" >"$dir/r0.log" 2>&1 &
p0=$!
NCCL_HOSTID=smoe-h1 timeout 120 "$bin" 1 "$dir/id" >"$dir/r1.log" 2>&1
r1=$?
wait $p0
r0=$?
sed 's/^/rank 0: /' "$dir/r0.log"
sed 's/^/rank 1: /' "$dir/r1.log"
[ "$r0" -eq 77 ] && [ "$r1" -eq 77 ] && exit 77
[ "$r0" -eq 0 ] && [ "$r1" -eq 0 ]
