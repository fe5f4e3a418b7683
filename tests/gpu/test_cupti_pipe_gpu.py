"""The CUPTI trace through the verifier's pipe, on a real GPU (red team round 295's class).

The timing audit reads the trace the injection library writes while the program runs; a program
that writes to the tracer's pipe itself (after the end record, from a static destructor, or before
the tracer's first line) voids the trace instead of feeding the audit."""

from __future__ import annotations

import subprocess

import pytest

from kernelloop.tools.cupti import build_injection_library
from kernelloop.tools.nvcc import find_toolchain
from kernelloop.tools.sandbox import Limits
from kernelloop.verify.program_run import run_program

pytestmark = pytest.mark.gpu

PROGRAM = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>
#include <cuda_runtime.h>
__global__ void busy(float* x, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * 2.f + 1.f; }
static void forge(const char* line) {
  const char* spec = getenv("KERNELLOOP_CUPTI_FD");
  if (spec != nullptr) { int fd = atoi(spec); if (write(fd, line, strlen(line)) < 0) {} }
}
struct Late { ~Late() { if (MODE == 1) forge("{\"kind\":\"kernel\",\"name\":\"_Z4busyPfi\",\"start\":1,\"end\":2,\"corr\":1}\n"); } };
static Late late;  // constructed before main: destroyed after the tracer's exit handler wrote its end
int main() {
  if (MODE == 2) forge("{\"kind\":\"meta\",\"cupti_version\":1,\"pid\":1}\n");  // before the first CUDA call
  float* x; cudaMalloc(&x, 1 << 22);
  for (int r = 0; r < 3; ++r) busy<<<4096, 256>>>(x, 1 << 20);
  cudaDeviceSynchronize();
  cudaFree(x);
  return 0;
}
"""


@pytest.fixture(scope="module")
def cupti_library(tmp_path_factory):
    return build_injection_library(tmp_path_factory.mktemp("cupti"))


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_only_the_tracers_own_bytes_make_a_trace(mode, tmp_path, cupti_library):
    source = tmp_path / "p.cu"
    source.write_text(PROGRAM.replace("MODE", str(mode)))
    binary = tmp_path / "p"
    subprocess.run([str(find_toolchain().nvcc), "-O2", str(source), "-o", str(binary)], check=True, timeout=300)
    run = run_program(binary, seed=1, limits=Limits(wall_timeout_s=120), cupti_library=cupti_library,
                      want_dump=False)
    assert run.result.returncode == 0, run.result.stderr
    if mode == 0:
        assert run.trace is not None and run.trace.complete and run.trace_problem is None
        assert sum("busy" in k.name for k in run.trace.kernels) == 3
    else:
        assert run.trace is None and "wrote to the tracer's pipe" in (run.trace_problem or ""), run.trace_problem
