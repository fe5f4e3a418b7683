"""What the audit's CUPTI injection records of host memory copies, on a real GPU.

The host-code scan lets a launcher call cudaMemcpy* because every copy that touches host memory
is counted by the timing audit against the baseline's. That holds only if CUPTI records a copy
between two pageable host buffers too (red teams rounds 10 and 11 asked: if it did not, such a
copy would be an unaudited write to any host address)."""

from __future__ import annotations

import os
import subprocess

import pytest

from kernelloop.tools.cupti import build_injection_library, injection_env, read_trace
from kernelloop.tools.nvcc import find_toolchain

pytestmark = pytest.mark.gpu

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
int main() {
  cudaFree(0);
  char* a = (char*)malloc(1 << 20);
  char* b = (char*)malloc(1 << 20);
  for (int i = 0; i < (1 << 20); ++i) a[i] = (char)i;
  cudaError_t e1 = cudaMemcpy(b, a, 4096, cudaMemcpyHostToHost);
  cudaError_t e2 = cudaMemcpy(b + 8192, a, 4096, cudaMemcpyDefault);
  cudaError_t e3 = cudaMemcpyAsync(b + 16384, a, 4096, cudaMemcpyHostToHost, 0);
  cudaDeviceSynchronize();
  printf("%d %d %d %d\n", (int)e1, (int)e2, (int)e3, (int)(b[100] == a[100] && b[8192 + 7] == a[7]));
  return 0;
}
"""


def test_host_to_host_copies_are_in_the_trace(tmp_path):
    source = tmp_path / "h2h.cu"
    source.write_text(PROGRAM)
    tc = find_toolchain()
    subprocess.run([str(tc.nvcc), "-O2", str(source), "-o", str(tmp_path / "h2h")], check=True, timeout=300)
    trace_path = tmp_path / "trace.jsonl"
    env = {**os.environ, **injection_env(build_injection_library(tmp_path / "cache"), trace_path)}
    proc = subprocess.run([str(tmp_path / "h2h")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "0", "0", "1"], proc.stdout + proc.stderr
    trace = read_trace(trace_path)
    host_copies = [c for c in trace.copies if c.copy_kind not in ("DtoD",)]
    print("copies:", [(c.copy_kind, c.bytes) for c in trace.copies])
    print("api:", sorted({a.name for a in trace.api if a.name and "emcpy" in a.name}))
    assert len(host_copies) == 3, [(c.copy_kind, c.bytes) for c in trace.copies]
