"""A launcher with a linkage specification of its own (`extern "C" cudaError_t f(...) { ... }`, the
style of C-callable libraries and ctypes bindings) is a launcher like any other: init finds and
wraps it, and the offline optimizer reads it (kept-aside set 4's writer found init blind to it)."""

from __future__ import annotations

import pytest

from kernelloop.optimizers.offline.launcher import read_editable
from kernelloop.program.init import InitSpec, generate
from kernelloop.program.scanner import function_name, scan_items
from kernelloop.program.split import split_program

SOURCE = """#include <cuda_runtime.h>
__global__ void scale_k(int n, float a, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= a;
}
extern "C" cudaError_t lib_scale(int n, float a, float* y) {
  scale_k<<<(n + 255) / 256, 256>>>(n, a, y);
  return cudaGetLastError();
}
extern "C++" void other(int n) { (void)n; }
extern "C" {
void inside_block(float* y) { (void)y; }
}
"""


def test_a_function_with_its_own_linkage_specification_is_a_function():
    names = [function_name(item) for item in scan_items(SOURCE)]
    assert "lib_scale" in names and "other" in names


@pytest.mark.parametrize("launcher", [None, "lib_scale"])
def test_init_wraps_an_extern_c_launcher_and_the_optimizer_reads_it(launcher):
    spec = InitSpec(launcher=launcher, values={"n": ["4096", "4095"], "a": ["2.0"]}, counts={"y": "n"},
                    roles={"y": "inout"})
    program = generate(SOURCE, spec, "lib.cu").program
    assert 'extern "C" cudaError_t lib_scale(int n, float a, float* y) {' in program
    assert "lib_scale(n, a, y);" in program  # the harness calls it
    split = split_program(program, "lib.cu")
    part = read_editable(split.editable, split.harness, split.exported)
    assert [(lau.fn.name, lau.kernel, lau.problem) for lau in part.launchers] == [("lib_scale", "scale_k", None)]
