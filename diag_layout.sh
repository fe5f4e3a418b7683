#!/bin/bash
# temporary: time the harness's mapped-layout runs of one program on the GPU
set -u
H=src/kernelloop/harness
nvcc -O3 -std=c++17 -arch=sm_90 -I$H tests/fixtures/redteam/round194/honest/cand.cu -o /tmp/honest 2>&1 | tail -3
t() { local s=$(date +%s.%N); "$@" > /tmp/o.txt 2> /tmp/e.txt; local rc=$?; local e=$(date +%s.%N); echo "rc=$rc $(echo "$e - $s" | bc) s :: $*"; tail -c 300 /tmp/e.txt; }
export KERNELLOOP_SEED=12345
t env /tmp/honest
t env KERNELLOOP_EXACT_BUFFERS=1 /tmp/honest
for mode in 0 1 2 3 4; do for rev in 0 1; do
  t env KERNELLOOP_EXACT_BUFFERS=1 KERNELLOOP_BUFFER_SHIFT=987654321:0:$mode:$rev /tmp/honest
done; done
t env KERNELLOOP_EXACT_BUFFERS=1 KERNELLOOP_SIZE_DRAW=777 KERNELLOOP_BUFFER_SHIFT=987654321:0:1:1 /tmp/honest
t env KERNELLOOP_SIZE_DRAW=777 /tmp/honest
which nsys ncu compute-sanitizer
