#!/usr/bin/env bash
# Capture the Nsight Compute reports kept under tests/fixtures/ncu/ (run on a CUDA machine).
# One launch of each suite kernel (the second: the first is a warm-up), full section set,
# clocks left as the card runs them (--clock-control none).
#   scripts/capture_ncu_fixtures.sh OUTDIR [ARCH]
set -euo pipefail
out=${1:?usage: capture_ncu_fixtures.sh OUTDIR [ARCH]}
arch=${2:-sm_90}
mkdir -p "$out"
work=$(mktemp -d)
{
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  ncu --version | tail -1
  nvcc --version | tail -1
} > "$out/capture_env.txt"
for src in kernels/*.cu; do
  name=$(basename "$src" .cu)
  nvcc -O3 -arch="$arch" "$src" -o "$work/$name"
  start=$(date +%s%N)
  ncu --set full --clock-control none --launch-skip 1 --launch-count 1 -f -o "$out/$name" "$work/$name" \
    > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; exit 1; }
  end=$(date +%s%N)
  echo "$name ncu_full_ms=$(( (end - start) / 1000000 ))" >> "$out/capture_env.txt"
done
cat "$out/capture_env.txt"
